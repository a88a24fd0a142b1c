"""The fuzz targets in fuzz/ stay runnable: their seeds pass, a short plain-loop run finds
nothing, and the inputs they found (each a bug, fixed) stay fixed.

The long, coverage-guided runs are ``fuzz/run_all.sh SECONDS`` (atheris); this keeps the
targets and the library honest in the ordinary test run, in a few seconds.
"""

from __future__ import annotations

import pytest

from filtex_proton.errors import FilterError
from filtex_proton.filterset import decode_filter_set

from .hostile_support import fuzz_target

TARGETS = ["fuzz_sql", "fuzz_filter_set", "fuzz_message"]
#: Mutated inputs per target in the plain loop (fixed seed: the same inputs every run).
RUNS = {"fuzz_sql": 20_000, "fuzz_filter_set": 20_000, "fuzz_message": 10_000}


@pytest.mark.parametrize("name", TARGETS)
def test_seed_corpus_passes(name: str) -> None:
    target = fuzz_target(name)
    seeds = target.seeds()
    assert len(seeds) >= 10
    for seed in seeds:
        target.test_one_input(seed)


@pytest.mark.parametrize("name", TARGETS)
def test_plain_loop_finds_nothing(name: str, tmp_path: object) -> None:
    target = fuzz_target(name)
    common = fuzz_target("fuzz_common")
    argv = [f"-runs={RUNS[name]}", "-seed=20260317", f"-artifact_prefix={tmp_path}/",
            f"-dict={target.DICTIONARY}"]
    assert common.plain_fuzz(target.test_one_input, target.seeds(), argv, quiet=True) == 0


#: Inputs the fuzzers found, each of which broke an invariant before its fix.
FOUND = [
    pytest.param("fuzz_filter_set", "01c13b02a3036a6d7300a3216170616368652e6f72673a73656c6563746f"
                 "722d66696c7465723a737472696e67a10f4a4d535072696f72697fffffff2034",
                 id="SQL text not UTF-8 via proton: UnicodeDecodeError"),
    pytest.param("fuzz_filter_set", "01c13002732d66696c746572c12b06a105636f6c6f72a104626c7565a104"
                 "6c697374c0050255015502a1036d6170c10902a17fffffffa10176",
                 id="char beyond U+10FFFF via proton: ValueError"),
    pytest.param("fuzz_filter_set", "01c12e02a3086e6f2d6c6f63616c00a31f61703a6e1b2d6c6f63616c2d66"
                 "6c7473716c2d66697c7473716c2d66696c7473a1716c2d66696c7473716c02a304666fc12502a304"
                 "666fc12502a304666fc12502a304666fc12502a304666fc12502a304666fc12502a30466",
                 id="char of 2^32-1 via proton: OverflowError"),
    pytest.param("fuzz_filter_set", "035201000b9652e0212c37424d5863f2fd08131e29343f4a55606b76818c"
                 "97a2adb8c3ced9e4effae4effae4effae4effae4effae4effae4effae4effae4effae4effae4effae4"
                 "effae4effae4effae4effae4effae47feffae4effae4effae4effae4effae4effae4effae4effae4ef"
                 "fae4effae4effae4effae4effae4effae4effae4effa05101b26313c4752",
                 id="non-ASCII symbol accepted, then as_data: UnicodeEncodeError"),
]


@pytest.mark.parametrize(("name", "data"), FOUND)
def test_found_inputs_stay_fixed(name: str, data: str) -> None:
    fuzz_target(name).test_one_input(bytes.fromhex(data))


def test_found_inputs_are_refused_as_filter_errors() -> None:
    """The wire inputs above, decoded by proton as a broker would: a FilterError each."""
    from proton import Data

    for param in FOUND[:3]:
        data = Data()
        data.decode(bytes.fromhex(str(param.values[1]))[1:])
        with pytest.raises(FilterError):
            decode_filter_set(data)
