"""The text a message's bytes must contain for a condition to hold: a byte search before the
evaluation, for scans no index helps.

A string or symbol is encoded as its UTF-8 bytes, verbatim, after a constructor and a length
(AMQP 1.0 part 1, §1.6.20 and §1.6.21), whichever section holds it and whatever wraps it. So a
message whose field equals ``'order.created'`` (a :class:`FieldEquals` whose keys are all
texts) has ``b"order.created"`` somewhere in its bytes, and one whose field starts with a
prefix has the prefix's bytes. A message in which no alternative of the condition finds each of
its texts cannot match: it is passed over without decoding a section. Anything else (a message
that holds the texts, a condition with an alternative that requires no text) is evaluated as
usual, so the answer is the evaluation's.
"""

from __future__ import annotations

from collections.abc import Callable

from filtex_proton.matcher.atoms import Atom, Condition, FieldEquals, FieldPrefix

__all__ = ["required_texts", "text_prefilter"]

Texts = tuple[bytes, ...]
"""Any one of these (an atom's texts), shortest first."""


def _texts(atom: Atom) -> Texts | None:
    """The bytes one of which a message satisfying ``atom`` holds; None when it need hold
    none (a number, a boolean, null, or an empty text, which every message holds)."""
    if type(atom) is FieldEquals:
        texts = []
        for key in atom.keys:
            if not (type(key) is tuple and key[0] == "s" and key[1]):
                return None
            texts.append(key[1].encode())
        return tuple(sorted(texts, key=len)) or None
    if type(atom) is FieldPrefix and atom.prefix:
        return (atom.prefix.encode(),)
    return None


def required_texts(condition: Condition) -> tuple[tuple[Texts, ...], ...] | None:
    """Per alternative, the texts of its atoms that require one (each atom: one of its
    texts); None when some alternative requires none (no byte search can rule it out)."""
    alternatives = []
    for conjunction in condition:
        atoms = tuple(texts for atom in conjunction if (texts := _texts(atom)) is not None)
        if not atoms:
            return None
        alternatives.append(atoms)
    return tuple(alternatives)


def text_prefilter(condition: Condition) -> Callable[[bytes], bool] | None:
    """A test of a message's bytes that is False only when the condition cannot hold for it;
    None when there is nothing to search for.

    One atom per alternative is searched for, the one whose shortest text is the longest (the
    rarest, as a rule): the test is one ``in`` when every alternative shares it, as the
    alternatives a disjunction inside a conjunction makes do."""
    alternatives = required_texts(condition)
    if alternatives is None:
        return None
    chosen = sorted({text for atoms in alternatives
                     for text in max(atoms, key=lambda texts: (len(texts[0]), -len(texts)))},
                    key=len, reverse=True)
    if len(chosen) == 1:
        only = chosen[0]
        return lambda data: only in data
    texts = tuple(chosen)
    return lambda data: any(text in data for text in texts)
