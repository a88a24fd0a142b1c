"""Conformance table: decimals in the BID encoding (§6.2, §6.3.1), arithmetic (§6.4.4.1), strings
and the other kinds (§6.4.2.3), timestamps and UTC (§6.3.2, §6.4.4.3.6-7).

Rows are checked as ``rows.py`` says.
"""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from proton import (
    char,
    decimal32,
    decimal64,
)

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.sql import compile_sql, functions

from ..support import bid32, bid64, bid128
from .rows import (
    EPOCH_2020,
    ROW_ARGS,
    U1,
    U_HIGH,
    U_LOW,
    F,
    J,
    N,
    T,
    check,
    row,
)

# =============================================================================================
# §6.2, §6.3.1: decimal32/64/128 in the BID encoding proton hands over

BID_ROWS = [
    row("§6.2 BID decimal32 1.5", "x = 1.5", T,
        msg={"application_properties": {"x": bid32(15, -1)}}),
    row("§6.2 BID decimal32 -7.5 (sign bit)", "x = -7.5", T,
        msg={"application_properties": {"x": decimal32(0xB200004B)}}),
    row("§6.2 BID decimal32 1 (hand-written bits)", "x = 1", T,
        msg={"application_properties": {"x": decimal32(0x32800001)}}),
    row("§6.2 BID decimal32 form 2 coefficient 9999999", "x = 9999999", T,
        msg={"application_properties": {
            "x": decimal32((0b11 << 29) | (101 << 21) | (9999999 & ((1 << 21) - 1)))}}),
    row("§6.2 BID decimal32 non-canonical coefficient is zero", "x = 0", T,
        msg={"application_properties": {
            "x": decimal32((0b11 << 29) | (101 << 21) | ((1 << 21) - 1))}}),
    row("§6.2 BID decimal32 +Infinity > any double", "x > 1.0E308", T,
        msg={"application_properties": {"x": decimal32(0x78000000)}}),
    row("§6.2 BID decimal32 -Infinity < any integer", "x < -9223372036854775808", T,
        msg={"application_properties": {"x": decimal32(0xF8000000)}}),
    row("§6.2 BID decimal64 1 (hand-written bits)", "x = 1", T,
        msg={"application_properties": {"x": decimal64(0x31C0000000000001)}}),
    row("§6.2 BID decimal64 0.001", "x = 0.001", T,
        msg={"application_properties": {"x": bid64(1, -3)}}),
    row("§6.2 BID decimal64 16 digits exact", "x = 1234567890.123456", T,
        msg={"application_properties": {"x": bid64(1234567890123456, -6)}}),
    row("§6.2 BID decimal64 NaN <> itself", "x <> x", T,
        msg={"application_properties": {"x": decimal64(0x7C00000000000000)}}),
    row("§6.2 BID decimal128 1 (hand-written bits)", "x = 1", T,
        msg={"application_properties": {
            "x": bid128(1)}}),
    row("§6.2 BID decimal128 34 digits exact (beyond double)",
        "x = 1234567890123456789012345678901.234", T,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3)}}),
    row("§6.2 BID decimal128 34 digits differs in the last digit",
        "x = 1234567890123456789012345678901.235", F,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3)}}),
    row("§6.2 BID decimal128 negative", "x = -0.5", T,
        msg={"application_properties": {"x": bid128(5, -1, negative=True)}}),
    row("§6.3.1 decimal32 = decimal128 of the same value", "x = y", T,
        msg={"application_properties": {"x": bid32(25, -1), "y": bid128(2500, -3)}}),
    row("§6.3.1 decimal32 < decimal64", "x < y", T,
        msg={"application_properties": {"x": bid32(25, -1), "y": bid64(2501, -3)}}),
    row("§6.3.1 decimal + decimal is exact", "x + y = 0.3", T,
        msg={"application_properties": {"x": bid64(1, -1), "y": bid128(2, -1)}}),
    row("§6.3.1 decimal + double is a double", "x + 0.2E0 = 0.30000000000000004E0", T,
        msg={"application_properties": {"x": bid64(1, -1)}}),
    row("§6.3.1 negating a 34-digit decimal128 is exact",
        "x = -1234567890123456789012345678901.234", T,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3, negative=True)}}),
    row("§6.3.1 negating a 34-digit decimal128 field is exact",
        "-x = 1234567890123456789012345678901.234", T,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3, negative=True)}}),
    row("§6.3.1 34-digit decimal subtraction is exact",
        "x = 0 - 1234567890123456789012345678901.234", T,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3, negative=True)}}),
    row("§6.3.1 decimal overflow beyond decimal128 is NaN", "x * x <> x * x", T,
        msg={"application_properties": {"x": Decimal("9.99E6144")}}),
    row("§6.3.1 decimal overflow is not NULL", "(x * x) IS NULL", F,
        msg={"application_properties": {"x": Decimal("9.99E6144")}}),
    row("apache §2.2 JMS reads decimal32 as double", "x = 1.5", T, dialect=J,
        msg={"application_properties": {"x": bid32(15, -1)}}),
    row("apache §2.2 JMS reads decimal128 as double (rounded)", "x = 0.1", T, dialect=J,
        msg={"application_properties": {"x": bid128(1, -1)}}),
]


@pytest.mark.parametrize(ROW_ARGS, BID_ROWS)
def test_bid_decimals(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.4.4.1: arithmetic, overflow, NaN, INF, division, concatenation

ARITH_ROWS = [
    row("§6.4.4.1.2 int/int truncates toward zero", "7 / 2 = 3", T),
    row("§6.4.4.1.2 negative int/int truncates toward zero", "-7 / 2 = -3", T),
    row("§6.4.4.1.2 int/negative int truncates toward zero", "7 / -2 = -3", T),
    row("§6.4.4.1.2 negative/negative truncates", "-7 / -2 = 3", T),
    row("§6.4.4.1.2 field int/int truncates", "neg / two = -2", T),
    row("§6.4.4.1.2 % takes the dividend's sign (+,+)", "7 % 3 = 1", T),
    row("§6.4.4.1.2 % takes the dividend's sign (-,+)", "-7 % 3 = -1", T),
    row("§6.4.4.1.2 % takes the dividend's sign (+,-)", "7 % -3 = 1", T),
    row("§6.4.4.1.2 % takes the dividend's sign (-,-)", "-7 % -3 = -1", T),
    row("§6.4.4.1.2 % of fields", "neg % two = -1", T),
    row("§6.4.4.1.2 % needs an integer right operand", "(7 % 2.0) IS NULL", T),
    row("§6.4.4.1.2 % needs an integer left operand", "(7.5 % 2) IS NULL", T),
    row("§6.4.4.1.2 % of doubles is NULL", "(dbl % 2) IS NULL", T),
    row("§6.4.4.1.2 % by zero is NaN", "(7 % 0) <> (7 % 0)", T),
    row("§6.4.4.1.2 % by zero is not NULL", "(7 % zero) IS NULL", F),
    row("§6.4.4.1.2 integer / 0 is NaN (= is FALSE)", "(7 / 0) = (7 / 0)", F),
    row("§6.4.4.1.2 integer / 0 is NaN (<> is TRUE)", "i / zero <> 0", T),
    row("§6.4.4.1.2 0 / 0 is NaN", "0 / 0 = 0", F),
    row("§6.4.4.1.2 double / 0 is NaN, not INF", "dbl / 0 = INF", F),
    row("§6.4.4.1.2 double / 0.0 is NaN", "dbl / 0.0E0 <> 1", T),
    row("§6.4.4.1.2 decimal / 0 is NaN", "d / 0 = d / 0", F),
    row("§6.4.4.1.2 int / double is double", "7 / 2.0E0 = 3.5", T),
    row("§6.4.4.1.2 int / decimal is decimal", "7 / 2.0 = 3.5", T),
    row("§6.4.4.1.2 decimal arithmetic is exact", "0.1 + 0.2 = 0.3", T),
    row("§6.4.4.1.2 double arithmetic is binary", "0.1E0 + 0.2E0 = 0.3E0", F),
    row("§6.4.4.1.2 multiplication", "i * neg = -25", T),
    row("§6.4.4.1.2 precedence: * before +", "1 + 2 * 3 = 7", T),
    row("§6.4.4.1.2 left associativity of -", "10 - 3 - 2 = 5", T),
    row("§6.4.4.1.2 left associativity of /", "100 / 10 / 5 = 2", T),
    row("§6.4.4.1.2 parentheses", "(1 + 2) * 3 = 9", T),
    row("§6.3.1 ubyte + ubyte expands", "u + u = 400", T),
    row("§6.3.1 long max + 1 expands to ulong", "9223372036854775807 + 1 = 9223372036854775808", T),
    row("§6.3.1 ulong max + 1 overflows to NaN", "ul + 1 = ul + 1", F),
    row("§6.3.1 ulong max + 1 <> anything", "ul + one <> 0", T),
    row("§6.3.1 overflow is not NULL", "(ul + 1) IS NULL", F),
    row("§6.3.1 long min - 1 overflows", "lmin - 1 < 0", F),
    row("§6.3.1 2^32 * 2^32 overflows", "4294967296 * 4294967296 > 0", F),
    row("§6.3.1 (2^32-1)(2^32+1) = 2^64-1 fits", "4294967295 * 4294967297 = ul", T),
    row("§6.3.1 negating an unsigned gives a signed value", "-u = -200", T),
    row("§6.3.1 negating 2^63 gives long min", "-9223372036854775808 = lmin", T),
    row("§6.3.1 negating 2^64-1 overflows", "-ul < 0", F),
    row("§6.3.1 negating long min expands", "-lmin = 9223372036854775808", T),
    row("§6.3.1 double overflow is NaN, not INF", "1.7976931348623157E308 * 10 = INF", F),
    row("§6.3.1 double overflow <> anything", "1.7976931348623157E308 * 2 <> 0", T),
    row("§6.3.1 INF arithmetic stays INF", "INF + 1 = INF", T),
    row("§6.3.1 INF * -1 is -INF", "inf * -1 = -INF", T),
    row("§6.3.1 INF - INF is NaN", "INF - INF = 0", F),
    row("§6.3.1 INF - INF <> INF - INF", "inf - inf <> inf - inf", T),
    row("§6.3.1 NaN + 1 is NaN", "NAN + 1 = NAN + 1", F),
    row("§6.3.1 NaN propagates through decimals", "nan + d <> 0", T),
    row("§6.4.4.1.2 NULL + 1 is NULL", "(n + 1) IS NULL", T),
    row("§6.4.4.1.2 absent + 1 is NULL", "absent + 1 = 1", N),
    row("§6.4.4.1.2 boolean arithmetic is NULL", "(t + 1) IS NULL", T),
    row("§6.4.4.1.2 string * integer is NULL", "(s * 2) IS NULL", T),
    row("§6.4.4.1.2 string - string is NULL", "(s - s) IS NULL", T),
    row("§6.4.4.1.1 unary + is identity", "+i = 5", T),
    row("§6.4.4.1.1 unary - on a double", "-dbl = -2.5", T),
    row("§6.4.4.1.1 unary - on a decimal", "-d = -1.5", T),
    row("§6.4.4.1.1 unary - twice", "- -i = 5", T),
    row("§6.4.4.1.1 unary - on a string is NULL", "(-s) IS NULL", T),
    row("§6.4.4.1.1 unary + on a string is NULL", "(+s) IS NULL", T),
    row("§6.4.4.1.1 unary - on a boolean is NULL", "(-t) IS NULL", T),
    row("§6.4.4.1.2 string concatenation", "s + 'def' = 'abcdef'", T),
    row("§6.4.4.1.2 symbol + string concatenation", "sym + '!' = 'abc!'", T),
    row("§6.4.4.1.2 string + symbol concatenation",
        "'type: ' + p.content-type = 'type: text/plain'", T),
    row("§6.4.4.1.2 concatenation with empty string", "e + s + e = s", T),
    row("§6.4.4.1.2 concatenation of astral code points",
        "astral + astral = '\U0001d538\U0001d538'", T),
    row("§6.4.4.1.2 string + number is NULL", "(s + 1) IS NULL", T),
    row("§6.4.4.1.2 string + NULL is NULL", "(s + n) IS NULL", T),
    row("§6.4.4.1.2 char + string is NULL", "(c + s) IS NULL", T),
    row("§6.4.4.1.2 binary + binary is NULL", "(bin + bin) IS NULL", T),
]


@pytest.mark.parametrize(ROW_ARGS, ARITH_ROWS)
def test_arithmetic(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.4.2.3: strings, symbols, char, uuid, binary, boolean; kinds that cannot be compared

KIND_ROWS = [
    row("§6.4.2.3 string = symbol", "p.content-type = 'text/plain'", T),
    row("§6.4.2.3 symbol = symbol", "m.[x-opt-sym] = p.content-type", T),
    row("§6.4.2.3 string field = symbol field", "s = sym", T),
    row("§6.4.2.3 string < symbol orders by code point", "'abb' < sym", T),
    row("§6.4.2.3 string equality is case sensitive", "s = 'ABC'", F),
    row("§6.4.2.3 strings of different length differ", "s = 'abcd'", F),
    row("§6.4.2.3 prefix orders first", "s < 'abcd'", T),
    row("§6.4.2.3 empty string = ''", "e = ''", T),
    row("§6.4.2.3 empty string < any", "e < 'a'", T),
    row("§6.4.2.3 'Z' < 'a' by code point", "'Z' < 'a'", T),
    row("§6.4.2.3 astral > BMP by code point (not UTF-16)", "astral > '\uff21'", T),
    row("§6.4.2.3 double-quoted string constant", 's = "abc"', T),
    row("§6.4.2.3 string <> string", "s <> 'abd'", T),
    row("§6.4.2.3 string >= string", "s >= 'abc'", T),
    # §6.4.4.2.5 keeps control characters out of AMQP SQL strings (LEXICAL_ROWS below);
    # Java strings, and so JMS selectors, may hold them
    row("§6.4.2.3 newline in a string (JMS)", "nl = 'a\nb'", T, dialect=J),
    row("§6.4.2.3 char = char", "c = y", T,
        msg={"application_properties": {"c": char("a"), "y": char("a")}}),
    row("§6.4.2.3 char < char", "c < y", T,
        msg={"application_properties": {"c": char("a"), "y": char("b")}}),
    row("§6.4.2.3 char vs string cannot be compared", "c = 'a'", N),
    row("§6.4.2.3 uuid = same uuid", "id = p.correlation-id", T),
    row("§6.4.2.3 uuid <> other uuid", "id <> y", T,
        msg={"application_properties": {"id": U1, "y": U_LOW}}),
    row("§6.4.2.3 uuid ordering by bytes", "lo < hi", T,
        msg={"application_properties": {"lo": U_LOW, "hi": U_HIGH}}),
    row("§6.4.2.3 uuid vs its string form cannot be compared",
        "id = '12345678-1234-5678-1234-567812345678'", N),
    row("§6.4.4.2.6 binary = binary constant", "bin = 0x0A0B", T),
    row("§6.4.2.3 binary < binary", "bin < 0x0A0C", T),
    row("§6.4.2.3 shorter binary prefix orders first", "0x00 < 0x0000", T),
    row("§6.4.2.3 binary <> binary", "bin <> 0x0A", T),
    row("§6.4.2.3 binary vs string cannot be compared", "p.user-id = 'bob'", N),
    row("§6.4.2.3 boolean = boolean", "t = TRUE", T),
    row("§6.4.2.3 boolean <> boolean", "t <> f", T),
    row("§6.4.2.3 boolean ordering in AMQP SQL", "t > f", T),
    row("§6.4.2.3 boolean vs integer cannot be compared", "t = 1", N),
    row("§2.1 string vs integer cannot be compared: NULL", "s = 1", N),
    row("§2.1 string vs integer <> is NULL too", "s <> 1", N),
    row("§2.1 NOT of an incomparable is NULL", "NOT (s = 1)", N),
    row("§2.1 string vs boolean", "s = TRUE", N),
    row("§2.1 binary vs integer", "bin > 1", N),
    row("§2.1 uuid vs integer", "id = 1", N),
    row("§2.1 map vs integer", "m = 1", N),
    row("§2.1 list vs list", "l = l", N),
    row("§2.1 timestamp vs non-ISO string", "p.creation-time = 'soon'", N),
    row("§2.1 char vs integer", "c = 97", N),
    row("§2.1 decimal vs string", "d = '1.5'", N),
]


@pytest.mark.parametrize(ROW_ARGS, KIND_ROWS)
def test_kinds(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.3.2, §6.4.4.3.6-7: timestamps

TS_ROWS = [
    row("§6.3.2 timestamp = integer", "p.creation-time = 1577836800000", T),
    row("§6.3.2 timestamp > integer", "p.creation-time > 1577836799999", T),
    row("§6.3.2 integer < timestamp", "1577836799999 < p.creation-time", T),
    row("§6.3.2 timestamp = ulong constant range", "ts < 18446744073709551615", T),
    row("§6.3.2 timestamp vs ubyte field", "ts > one", T),
    row("§6.3.2 timestamp = double (as double)", "ts = 1577836800000.0E0", T),
    row("§6.3.2 timestamp = decimal (exact)", "ts = 1577836800000.0", T),
    row("§6.3.2 timestamp = timestamp", "ts = p.creation-time", T),
    row("§6.3.2 timestamp < timestamp", "p.creation-time < p.absolute-expiry-time", T),
    row("§6.3.2 ISO date-time with Z", "p.creation-time = '2020-01-01T00:00:00Z'", T),
    row("§6.3.2 ISO date-time with offset", "p.creation-time = '2020-01-01T01:00:00+01:00'", T),
    row("§6.3.2 ISO date-time without zone is UTC", "p.creation-time = '2020-01-01T00:00:00'", T),
    row("§6.3.2 ISO date only", "p.creation-time = '2020-01-01'", T),
    row("§6.3.2 ISO date-time with milliseconds", "p.creation-time < '2020-01-01T00:00:00.001Z'",
        T),
    row("§6.3.2 ISO string on the left", "'2019-12-31T23:59:59Z' < p.creation-time", T),
    row("§6.3.2 ISO string field vs timestamp", "iso = p.creation-time", T),
    row("§6.3.2 ISO string IN list", "p.creation-time IN ('2020-01-01T00:00:00Z', 'x')", T),
    row("§6.3.2 ISO strings in BETWEEN", "p.creation-time BETWEEN '2019-12-31' AND '2020-01-02'",
        T),
    row("§6.3.2 ISO duration: timestamp 1000 ms = PT1S", "DATE('1970-01-01T00:00:01Z') = 'PT1S'",
        T),
    row("§6.3.2 ISO duration P1D", "DATE('1970-01-02') = 'P1D'", T),
    row("§6.3.2 ISO duration with fraction", "DATE('1970-01-01T00:00:00.5Z') = 'PT0.5S'", T),
    row("§6.3.2 ISO duration field", "p.creation-time > dur", T),
    row("§6.3.2 not ISO: NULL", "p.creation-time < 'tomorrow'", N),
    row("§6.3.2 ISO strings are strings when compared with strings",
        "'2020-01-01' = '2020-01-01T00:00:00Z'", F),
    row("§6.3.2 ISO string vs integer is not converted", "iso = 1577836800000", N),
    row("§6.3.2 timestamp + integer is a timestamp",
        "p.creation-time + 3600000 = p.absolute-expiry-time", T),
    row("§6.3.2 timestamp + integer compares with ISO",
        "p.creation-time + 3600000 = '2020-01-01T01:00:00Z'", T),
    row("§6.3.2 integer + timestamp is a timestamp",
        "3600000 + p.creation-time = '2020-01-01T01:00:00Z'", T),
    row("§6.3.2 timestamp - integer", "p.creation-time - 1 < '2020-01-01'", T),
    row("§6.3.2 timestamp - timestamp is a long",
        "p.absolute-expiry-time - p.creation-time = 3600000", T),
    row("§6.3.2 a long is not read as ISO",
        "p.absolute-expiry-time - p.creation-time = 'PT1H'", N),
    row("§6.3.2 timestamp % integer", "p.creation-time % 1000 = 0", T),
    row("§6.3.2 timestamp before 1970", "DATE('1969-12-31T23:59:59Z') = -1000", T),
    row("§6.4.4.3.7 DATE() of a date-time", "DATE('2020-01-01T00:00:00Z') = p.creation-time", T),
    row("§6.4.4.3.7 DATE() without zone is UTC", "DATE('2020-01-01T00:00:00') = ts", T),
    row("§6.4.4.3.7 DATE() with offset", "DATE('2020-01-01T00:00:00-01:00') = ts + 3600000", T),
    row("§6.4.4.3.7 DATE() of a date", "DATE('2020-01-01') = ts", T),
    row("§6.4.4.3.7 DATE() of a field", "DATE(iso) = ts", T),
    row("§6.4.4.3.7 DATE() of a bad field value is NULL", "DATE(s) IS NULL", T),
    row("§6.4.4.3.7 DATE() of a number is NULL", "DATE(i) IS NULL", T),
    row("§6.4.4.3.7 DATE() forces date comparison of an ISO string field", "iso = DATE(date)", T),
    row("§6.4.4.3.7 DATE() = DATE()", "DATE('2020-01-01') = DATE('2020-01-01T00:00:00Z')", T),
    row("§6.4.4.3.7 DATE() + integer", "DATE('1970-01-01T00:00:00Z') + 1000 = 1000", T),
]


@pytest.mark.parametrize(ROW_ARGS, TS_ROWS)
def test_timestamps(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> int:
    now = EPOCH_2020 + 10 * 3_600_000
    monkeypatch.setattr(functions, "time", SimpleNamespace(time_ns=lambda: now * 1_000_000))
    return now


UTC_ROWS = [
    row("§6.4.4.3.6 UTC() is now", "UTC() = DATE('2020-01-01T10:00:00Z')", T),
    row("§6.4.4.3.6 UTC() is a timestamp", "UTC() = '2020-01-01T10:00:00Z'", T),
    row("§6.4.4.3.6 UTC() vs integer", "UTC() = 1577872800000", T),
    row("§6.4.4.3.6 creation-time within the last hour (blog filter)",
        "p.creation-time > UTC() - 3600000", F),
    row("§6.4.4.3.6 creation-time within the last 11 hours",
        "p.creation-time > UTC() - 39600000", T),
    row("§6.4.4.3.6 expired", "p.absolute-expiry-time < UTC()", T),
    row("§6.4.4.3.6 UTC() minus a timestamp is a long", "UTC() - ts = 36000000", T),
    row("apache §2.2 UTC() in JMS is a long", "UTC() > 1577872799999", T, dialect=J),
    row("apache §2.2 UTC() in JMS vs double", "UTC() < 1.6E12", T, dialect=J),
    row("apache §2.2 JMSTimestamp vs UTC()", "JMSTimestamp > UTC() - 39600000", T, dialect=J),
]


@pytest.mark.parametrize(ROW_ARGS, UTC_ROWS)
def test_utc(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None,
             frozen_clock: int) -> None:
    check(text, dialect, msg, expected)


def test_utc_is_evaluated_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """§6.4.4.3.6: UTC() is the time of evaluation, not of compilation."""
    clock = {"now": 1000}
    monkeypatch.setattr(functions, "time",
                        SimpleNamespace(time_ns=lambda: clock["now"] * 1_000_000))
    compiled = compile_sql("UTC() > 1500")
    view = DictMessageView()
    assert compiled.evaluate(view) is False
    clock["now"] = 2000
    assert compiled.evaluate(view) is True
