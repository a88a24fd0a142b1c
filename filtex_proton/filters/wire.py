"""Filter values between ``proton.Data`` and Python, without recursion.

``Data.get_object()`` and ``Data.put_object()`` recurse once per nesting level,
so a hostile attach with groups nested 10,000 deep would surface as a
``RecursionError`` deep inside proton. These walkers use an explicit stack and
refuse, with a limit error, anything nested deeper than any filter within the
configured :class:`~filtex_proton.limits.Limits` can be. Everything built from
their output can therefore recurse safely. They also refuse, before reading a
single member, a container holding more members than any filter within the
limits can (a group of 20,000 members would otherwise be read whole, one
proton call per node, before ``max_group_members`` refused it).
"""

from __future__ import annotations

import decimal
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from proton import UNDESCRIBED, Array, Data, Described, decimal128

from filtex_proton.amqp.bid import encode_decimal128
from filtex_proton.amqp.types import INTEGER_RANGES, Kind, amqp_type_name, kind_of
from filtex_proton.errors import FilterError
from filtex_proton.limits import Limits

__all__ = [
    "TEXT_KINDS", "UNDESCRIBED_ANY", "Bounds", "check_value", "integer_in_range", "max_nesting",
    "read_data", "summarise", "write_data",
]

_CONTAINERS: Final = frozenset({Data.LIST, Data.MAP, Data.DESCRIBED, Data.ARRAY})
#: proton types UNDESCRIBED as a Constant, yet Array() and .descriptor take and hold it.
UNDESCRIBED_ANY: Final[Any] = UNDESCRIBED
#: The kinds §4.1.1 treats as one for comparison (and the filters accept for text).
TEXT_KINDS: Final = frozenset({Kind.STRING, Kind.SYMBOL})


@dataclass(frozen=True, slots=True)
class Bounds:
    """How deep, and how wide, the containers of a filter within the limits can be."""

    depth: int
    width: int
    """Members (a map's keys and values count apiece) of any one container."""


def max_nesting(limits: Limits) -> Bounds:
    """The deepest nesting and widest container a filter within ``limits`` can have.

    Depth: each group level costs two (the described value and its list), a
    property filter's value at most one per entry it holds, plus a little slack
    for the filter set's own map and the innermost described filter. Width: a
    group's members, a property map's keys and values, or the filter set's own
    map, whichever the limits allow most of.
    """
    return Bounds(
        depth=2 * limits.max_group_depth + limits.max_property_entries + 8,
        width=max(limits.max_group_members, 2 * limits.max_property_entries,
                  2 * limits.max_filters_per_set) + 2,
    )


def _split(bounds: int | Bounds) -> tuple[int, int | None]:
    """``(depth, width)``; a bare int bounds the depth only."""
    if isinstance(bounds, Bounds):
        return bounds.depth, bounds.width
    return bounds, None


def _too_wide(count: int, width: int) -> FilterError:
    return FilterError(
        f"a container of {count} members, more than the {width} the limits max_group_members, "
        "max_property_entries and max_filters_per_set allow",
        limit=True,
    )


def _too_deep(depth: int) -> FilterError:
    return FilterError(
        f"value nested more than {depth} levels deep, deeper than the limits "
        "max_group_depth and max_property_entries allow",
        limit=True,
    )


@dataclass(slots=True)
class _Frame:
    kind: int
    items: list[Any] = field(default_factory=list)
    array_type: int = 0
    array_described: bool = False


def _close(frame: _Frame) -> Any:
    """The Python value of a finished container."""
    items = frame.items
    if frame.kind == Data.LIST:
        return items
    if frame.kind == Data.DESCRIBED:
        return Described(items[0], items[1])
    if frame.kind == Data.ARRAY:
        if frame.array_described:
            return Array(items[0], frame.array_type, *items[1:])
        return Array(UNDESCRIBED_ANY, frame.array_type, *items)
    result: dict[Any, Any] = {}
    for i in range(0, len(items) - 1, 2):
        key = items[i]
        try:
            duplicate = key in result
        except TypeError:
            raise FilterError(
                f"a map key of type {amqp_type_name(key)} is not supported"
            ) from None
        if duplicate:
            raise FilterError(f"duplicate map key {summarise(key)}")
        result[key] = items[i + 1]
    return result


def read_data(data: Data, bounds: int | Bounds) -> Any:
    """The Python value of ``data``'s current node, as ``get_object()`` would give it.

    The cursor is left on that node. Raises :class:`FilterError` (a limit) when
    the value is nested more containers deep than ``bounds`` allows (an int:
    the depth alone), or a container holds more members than its width.
    """
    max_depth, width = _split(bounds)
    stack: list[_Frame] = []

    def open_node() -> Any:
        """A scalar's value, or :data:`_OPEN` after entering a container."""
        node_type = data.type()
        if node_type is None or node_type not in _CONTAINERS:
            try:
                value = data.get_object()
            except (ValueError, OverflowError):  # proton does not check UTF-8 or chars
                kind = "value" if node_type is None else Data.type_name(node_type)
                raise FilterError(f"a malformed {kind} (not valid AMQP)") from None
            # proton hands out binary as a memoryview over its own buffer: copy it out.
            return bytes(value) if isinstance(value, memoryview) else value
        if len(stack) >= max_depth:
            raise _too_deep(max_depth)
        frame = _Frame(node_type)
        if node_type == Data.ARRAY:
            count, described, array_type = data.get_array()
            frame.array_type = int(array_type or 0)
            frame.array_described = bool(described)
        else:
            count = data.get_list() if node_type == Data.LIST else (
                data.get_map() if node_type == Data.MAP else 2)
        if width is not None and count > width:
            raise _too_wide(count, width)
        data.enter()
        stack.append(frame)
        return _OPEN

    value = open_node()
    while True:
        if value is _OPEN:  # inside a container, before its first child
            if data.next() is not None:
                value = open_node()
                continue
            data.exit()
            value = _close(stack.pop())
        if not stack:
            return value
        stack[-1].items.append(value)
        if data.next() is not None:
            value = open_node()
        else:
            data.exit()
            value = _close(stack.pop())


class _Marker:
    """A private sentinel (``_OPEN``: a container was entered; ``_DONE``: no more children)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_OPEN: Final = _Marker("_OPEN")
_DONE: Final = _Marker("_DONE")


def write_data(value: Any, data: Data) -> None:
    """Append ``value`` to ``data`` at its cursor, as ``put_object()`` would."""
    # Each stack entry is an iterator over the children still to write in a
    # container that has been entered.
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        item = next(stack[-1], _DONE)
        if item is _DONE:
            stack.pop()
            if stack:
                data.exit()
            continue
        if isinstance(item, Described):
            data.put_described()
            children: list[Any] = [item.descriptor, item.value]
        elif isinstance(item, Array):
            described = item.descriptor is not UNDESCRIBED_ANY
            data.put_array(described, item.type)
            children = ([item.descriptor] if described else []) + list(item.elements)
        elif isinstance(item, dict):
            data.put_map()
            children = [x for pair in item.items() for x in pair]
        elif isinstance(item, list):
            data.put_list()
            children = list(item)
        elif isinstance(item, decimal.Decimal):
            # A value types.py allows that proton cannot encode: send it as decimal128.
            data.put_decimal128(decimal128(encode_decimal128(item)))
            continue
        else:
            data.put_object(item)
            continue
        data.enter()
        stack.append(iter(children))


def _children(value: Any) -> list[Any] | tuple[Any, ...] | None:
    kind = kind_of(value)
    if kind is Kind.MAP:
        return [x for pair in value.items() for x in pair]
    if kind is Kind.LIST:
        return value  # type: ignore[no-any-return]
    if kind is Kind.ARRAY:
        head = () if value.descriptor is UNDESCRIBED_ANY else (value.descriptor,)
        return head + tuple(value.elements)
    if kind is Kind.DESCRIBED:
        return (value.descriptor, value.value)
    return None


def check_value(value: Any, bounds: int | Bounds) -> None:
    """Refuse what is not an AMQP value, or nests deeper than ``bounds`` allows.

    Values from ``Data`` always pass; this guards the library's own users, who
    may hand in a Python ``set`` or a ``ubyte(300)``. Width is not checked here:
    a Python value is already whole, and each filter checks its own limits.
    """
    max_depth, _width = _split(bounds)
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        try:
            kind = kind_of(item)
        except TypeError:
            raise FilterError(
                f"a Python {type(item).__name__} is not an AMQP value"
            ) from None
        if kind is Kind.INTEGER:
            _check_integer(item)
        elif kind is Kind.SYMBOL and not item.isascii():
            raise FilterError("a symbol holds ASCII characters only")
        elif kind is Kind.STRING and not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise FilterError("a string that cannot be encoded in UTF-8") from None
        elif isinstance(item, decimal.Decimal):
            try:
                encode_decimal128(item)
            except ValueError:
                raise FilterError(f"{item} cannot be sent as an AMQP decimal128") from None
        children = _children(item)
        if children is None:
            continue
        if depth >= max_depth:
            raise _too_deep(max_depth)
        stack.extend((child, depth + 1) for child in children)


def integer_in_range(value: Any) -> bool:
    """Whether an integer lies in the range of its own AMQP type (``ubyte(300)`` does not)."""
    number = int(value)
    for python_type, (low, high) in INTEGER_RANGES.items():
        if isinstance(value, python_type):
            return low <= number <= high
    return False


def _check_integer(value: Any) -> None:
    if not integer_in_range(value):
        raise FilterError(f"{int(value)} is out of the range of AMQP {amqp_type_name(value)}")


def summarise(value: Any, limit: int = 60) -> str:
    """A short, bounded rendering of a value for error texts (never a full repr)."""
    try:
        kind = kind_of(value)
    except TypeError:
        return f"<{type(value).__name__}>"
    if kind in (Kind.MAP, Kind.LIST, Kind.ARRAY, Kind.DESCRIBED):
        return f"<{amqp_type_name(value)}>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

