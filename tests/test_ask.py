"""ASK (key-value aggregation, p4src/ask.p4) on p4sim in this process: exact results.

Every run goes through ``inc.p4`` on p4sim with the job installed by ``controller.systems.ask``
(``topologies/ask_local.py``); results are compared with ``collections.Counter`` over the same
input. The Mininet run of the same hosts is tests/test_mininet_ask.py.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.systems.ask import SEEN_MASK, AskRequest
from hosts.ask.mapper import MapperFlow
from hosts.ask.wire import fingerprint, kv_packet, parse, place
from topologies.ask_local import AskBench, Impairment, _ip, _mac, chunks
from wire.framing import decapsulate, encapsulate
from wire.header import ASK_TUPLES, DropReason, Flag, Header, Op


def zipf_words(rng: random.Random, n: int, vocab: int = 400) -> list[str]:
    return [f"w{int(rng.paretovariate(1.0)) % vocab}" for _ in range(n)]


@pytest.fixture(scope="module")
def bench() -> Iterator[AskBench]:
    with AskBench(mappers=2, rows=32, window=4) as b:
        yield b


def drops(b: AskBench) -> dict[str, int]:
    out = {}
    for r in DropReason:
        n = b.sw.counter_read("inc_drops", int(r))[0]
        if n:
            out[r.name] = n
    return out


def ask_registers(b: AskBench) -> dict[str, list[int]]:
    return {
        e.name: list(b.sw.extern(e.name).values)
        for e in b.sw.externs()
        if e.kind == "register" and ".ask." in e.name
    }


def test_word_count_is_exact_across_array_swaps(bench: AskBench) -> None:
    rng = random.Random(1)
    words = [zipf_words(rng, 1500) for _ in range(2)]
    out = bench.run([[(w, 1) for w in ws] for ws in words], swap_every=2, tuples_per_packet=4)
    assert out.result == Counter(words[0] + words[1])
    assert out.epochs >= 3, "the run must cross array swaps"
    st = out.reducer_stats
    assert st.drained_tuples > 0 and st.passed_tuples > 0
    assert st.collisions == 0


def test_forced_fingerprint_collisions_are_detected_and_results_stay_exact(
    bench: AskBench,
) -> None:
    rng = random.Random(2)
    words = [zipf_words(rng, 800, vocab=300) for _ in range(2)]
    out = bench.run([[(w, 1) for w in ws] for ws in words], fp_bits=6)  # 63 fingerprints
    assert out.reducer_stats.collisions > 0
    assert out.result == Counter(words[0] + words[1])


@pytest.mark.parametrize("rate", [0.01, 0.05])
def test_exact_under_loss_duplication_and_reordering(bench: AskBench, rate: float) -> None:
    rng = random.Random(3)
    words = [zipf_words(rng, 3000, vocab=2000) for _ in range(2)]
    imp = Impairment(loss=rate, dup=rate, reorder=rate, seed=int(rate * 1000))
    out = bench.run(
        [[(w, 1) for w in ws] for ws in words], impair=imp, swap_every=3, tuples_per_packet=2
    )
    assert out.result == Counter(words[0] + words[1])
    assert min(out.impaired.values()) > 0, out.impaired  # every impairment happened
    assert sum(s.retransmissions for s in out.mapper_stats) > 0
    assert out.epochs >= 3


def test_group_by_sum_and_count_with_negative_values_and_hot_keys_first(
    bench: AskBench,
) -> None:
    rng = random.Random(4)
    rows = [[(rng.randrange(50), rng.randrange(-1000, 1000)) for _ in range(600)] for _ in (0, 1)]
    sums: Counter[object] = Counter()
    for part in rows:
        for k, v in part:
            sums[("sum", k)] += v
            sums[("count", k)] += 1
    inputs = [
        [{("sum", k): v for k, v in part[i : i + 1]} | {("count", part[i][0]): 1}
         for i in range(len(part))]
        for part in rows
    ]  # fmt: skip
    out = bench.run(inputs, chunked=True, hot_threshold=2)
    assert out.result == sums
    assert out.reducer_stats.bypass_tuples > 0


def test_columns_packed_with_numpy_are_exact_with_hot_keys_in_the_switch(
    bench: AskBench,
) -> None:
    np = pytest.importorskip("numpy")
    rng = random.Random(5)
    words = [zipf_words(rng, 4000, vocab=1500) for _ in range(2)]
    columns = []
    for ws in words:  # per chunk of 2000 words: its distinct words and their counts (Arrow's)
        parts = [Counter(ws[i : i + 2000]) for i in range(0, len(ws), 2000)]
        columns.append([(list(c), np.array(list(c.values()))) for c in parts])
    out = bench.run(columns, chunked=True, hot_threshold=2)
    assert out.result == Counter(words[0] + words[1])
    st = out.reducer_stats
    assert st.drained_tuples > 0 and st.bypass_tuples > 0, "hot keys in the switch, cold bypass"
    for w, chunks_ in enumerate(columns):  # per chunk, a row's packets: its busiest column
        cfg = bench.mapper_config(w)
        least = 0
        for keys, counts in chunks_:
            hot = [fingerprint(k) for k, n in zip(keys, counts.tolist(), strict=True) if n >= 2]
            cells = Counter(place(fp, cfg.part_base, cfg.part_size) for fp in hot)
            busiest: dict[int, int] = {}
            for (row, _), n in cells.items():
                busiest[row] = max(busiest.get(row, 0), n)
            cold = len(keys) - len(hot)
            least += sum(busiest.values()) + -(-cold // ASK_TUPLES)
        assert out.mapper_stats[w].packets == least


def send(b: AskBench, port: int, payload: bytes) -> list[tuple[int, Header]]:
    dst = b.n + 1
    frame = encapsulate(payload, _mac(port), _mac(dst), _ip(port), _ip(dst))
    return [(p, parse(bytes(decapsulate(d) or b""))[0]) for p, d in b.sw.send(port, frame)]


def test_seen_bits_keep_a_duplicated_packets_tuples_from_being_counted_twice(
    bench: AskBench,
) -> None:
    bench.clear()
    m = MapperFlow(bench.mapper_config(0))
    fp_a = fingerprint("a")
    m.add("a", 5)
    m.flush()
    (payload,) = m.to_send(0.0)
    row, col = place(fp_a, m.cfg.part_base, m.cfg.part_size)
    key_reg = bench.sw.extern(f"IncIngress.ask.ask_key_{col:02d}")
    val_reg = bench.sw.extern(f"IncIngress.ask.ask_val_{col:02d}")
    addr = 2 * row + 1  # epoch 1: copy 1
    first = send(bench, 1, payload)
    assert [(p, h.flags & Flag.ACK, h.slot_count) for p, h in first] == [(1, Flag.ACK, 0)]
    assert (key_reg.values[addr], val_reg.values[addr]) == (fp_a, 5)
    again = send(bench, 1, payload)  # the duplicate: acknowledged, absorbs nothing
    assert [(p, h.psn, h.slot_count) for p, h in again] == [(1, 0, 0)]
    assert val_reg.values[addr] == 5
    seen = bench.sw.extern(SEEN_MASK).values[m.cfg.flow * m.cfg.window]
    assert seen & (1 << col)
    # A tuple the switch could not take (its cell holds another key) reaches the reducer,
    # and so does its duplicate, unchanged: the reducer counts the psn once.
    h = Header(op=Op.AGG_KV, job_id=1, worker_id=0, psn=1, agg_idx=row, epoch=1, ver=1)
    keys, vals = [0] * ASK_TUPLES, [0] * ASK_TUPLES
    keys[col], vals[col] = fp_a ^ (1 << 20), 7  # same column, another key
    assert (fp_a ^ (1 << 20)) % ASK_TUPLES == col
    out1 = send(bench, 1, kv_packet(h, keys, vals))
    out2 = send(bench, 1, kv_packet(h, keys, vals))
    assert [p for p, _ in out1] == [bench.n + 1] == [p for p, _ in out2]
    assert val_reg.values[addr] == 5


def test_forged_flows_cannot_touch_another_jobs_rows(bench: AskBench) -> None:
    bench.clear()
    before = ask_registers(bench)
    d0 = drops(bench)
    m = MapperFlow(bench.mapper_config(0))
    m.add("x", 1)
    m.flush()
    (payload,) = m.to_send(0.0)
    h, keys, vals = parse(payload)
    keys, vals = keys.tolist(), vals.tolist()
    cases = {
        "UNKNOWN_WORKER": (2, payload),  # mapper 0's flow from mapper 1's port
        "UNKNOWN_JOB": (1, kv_packet(Header(op=Op.AGG_KV, job_id=9, psn=0, epoch=1), keys, vals)),
        "OUT_OF_REGION": (
            1,
            kv_packet(
                Header(op=Op.AGG_KV, job_id=1, worker_id=0, agg_idx=(h.agg_idx + 16) % 32, epoch=1),
                keys,
                vals,
            ),
        ),  # fmt: skip
    }
    for reason, (port, p) in cases.items():
        assert send(bench, port, p) == [], reason
    # a mapper may not drain, the reducer may not send tuples
    drain = Header(op=Op.AGG_KV, flags=Flag.DRAIN, job_id=1, worker_id=0, agg_idx=h.agg_idx)
    assert send(bench, 1, kv_packet(drain, keys, vals)) == []
    tuples = Header(op=Op.AGG_KV, job_id=1, worker_id=2, agg_idx=h.agg_idx, epoch=1)
    assert send(bench, 3, kv_packet(tuples, keys, vals)) == []
    after = ask_registers(bench)
    assert after == before
    d1 = drops(bench)
    grew = {k: d1.get(k, 0) - d0.get(k, 0) for k in d1}
    assert grew == {
        "UNKNOWN_WORKER": 3, "UNKNOWN_JOB": 1, "OUT_OF_REGION": 1,
        **{k: 0 for k in d1 if k not in ("UNKNOWN_WORKER", "UNKNOWN_JOB", "OUT_OF_REGION")},
    }  # fmt: skip


def test_request_checks() -> None:
    with pytest.raises(ValueError, match="power of two"):
        AskRequest(workers=2, rows=64, window=6)
    with pytest.raises(ValueError, match="seen entries"):
        AskRequest(workers=4, rows=16, window=8)


def test_chunks_count_consecutive_words() -> None:
    assert list(chunks("ababc", 2)) == [{"a": 1, "b": 1}, {"a": 1, "b": 1}, {"c": 1}]


def test_arrow_sum_counts_give_sum_and_count_per_key_combined_across_batches() -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is in the test extra: make setup-test")
    from hosts.ask.spark_arrow import sum_counts

    big = 2**31 - 1
    batch = pa.RecordBatch.from_pydict({"k": [1, 3, 1, 2, 2, 1], "v": [5, -3, 7, big, big, 0]})
    other = pa.RecordBatch.from_pydict({"k": [3, 4], "v": [1, 2]})
    expect = {"s1": 12, "c1": 3, "s3": -2, "c3": 2, "s2": 2 * big, "c2": 2, "s4": 2, "c4": 1}
    for limit, least in ((1 << 18, 1), (2, 2)):  # one chunk; or more when keys pass limit
        chunks_ = list(sum_counts(iter([batch, other]), limit))
        assert len(chunks_) >= least
        total: Counter[object] = Counter()
        for keys, values in chunks_:
            assert len(set(keys)) == len(keys), "each tuple key once per chunk"
            total.update(dict(zip(keys, values.tolist(), strict=True)))
        assert total == expect  # key 2's sum leaves int32: its tuples are cut by the mapper


def test_csv_lines_parsed_in_arrow_give_the_same_sums_and_counts_as_the_host() -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is in the test extra: make setup-test")
    from hosts.ask.spark_arrow import csv_sum_counts

    rng = random.Random(9)
    rows = [(rng.randrange(-5, 40), rng.randrange(-1000, 1001)) for _ in range(700)]
    lines = ["k,v", *(f"{k},{v}" for k, v in rows), ""]
    expect: Counter[object] = Counter()
    for k, v in rows:
        expect[f"s{k}"] += v
        expect[f"c{k}"] += 1
    by_line = [pa.RecordBatch.from_pydict({"value": lines[i : i + 97]}) for i in range(0, 702, 97)]
    whole = [
        pa.RecordBatch.from_pydict({"value": ["\n".join(lines[:300]), "\n".join(lines[300:])]})
    ]
    for batches, limit in ((by_line, 1 << 18), (whole, 1 << 18), (by_line, 8)):
        total: Counter[object] = Counter()
        for keys, values in csv_sum_counts(iter(batches), header="k,v", limit=limit):
            assert len(set(keys)) == len(keys), "each tuple key once per chunk"
            total.update(dict(zip(keys, values.tolist(), strict=True)))
        assert dict(total) == dict(expect)  # a line per row or whole texts: the host's sums
    bad = [pa.RecordBatch.from_pydict({"value": ["1,2", "3;4"]})]
    with pytest.raises(ValueError, match="not two integers"):
        list(csv_sum_counts(iter(bad)))


def test_values_beyond_int32_go_as_several_tuples_that_add_up() -> None:
    np = pytest.importorskip("numpy")
    from hosts.ask.mapper import MapperConfig

    m = MapperFlow(MapperConfig(job_id=1, flow=0, part_base=0, part_size=2, window=64))
    big = [3 * 2**31 + 5, -(2**33), 2**31 - 1, -(2**31), 0]
    m.add_columns(["a", "b", "c", "d", "e"], np.array(big))
    got: Counter[int] = Counter()
    for p in m.to_send(0.0):
        _, ks, vs = parse(p)
        for k, v in zip(ks.tolist(), vs.tolist(), strict=True):
            if k:
                got[k] += v
    assert got == {fingerprint(k): v for k, v in zip("abcde", big, strict=True)}
    assert m.sent == dict(zip("abcde", big, strict=True))


def test_arrow_word_counts_equal_counter_of_str_split() -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is in the test extra: make setup-test")
    from hosts.ask.spark_arrow import word_counts

    rng = random.Random(3)
    lines = [" ".join(zipf_words(rng, rng.randrange(0, 12))) for _ in range(500)]
    lines += ["", "  two\tspaces  ", "form\x0cfeed"]
    batches = [pa.RecordBatch.from_pydict({"value": lines[i : i + 77]}) for i in range(0, 503, 77)]
    total: Counter[object] = Counter()
    for keys, counts in word_counts(iter(batches)):
        assert len(set(keys)) == len(keys), "each word once per batch"
        total.update(dict(zip(keys, counts.tolist(), strict=True)))
    assert total == Counter(" ".join(lines).split())


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_splits_of_a_file_hold_every_line_once_and_count_its_words(
    tmp_path: Path, parts: int
) -> None:
    from hosts.ask.text_splits import chunk_counts_of, split_blocks

    rng = random.Random(parts)
    lines = [" ".join(zipf_words(rng, rng.randrange(0, 12))) + "\n" for _ in range(300)]
    path = tmp_path / "text.txt"
    path.write_text("".join(lines) + "no newline at the end")
    for block in (8, 100, 1 << 20):
        got = [b for i in range(parts) for b in split_blocks(path, i, parts, block)]
        assert b"".join(got) == path.read_bytes()
        assert all(b.endswith(b"\n") for b in got[:-1]), "blocks of whole lines"
    total: Counter[object] = Counter()
    for i in range(parts):
        for c in chunk_counts_of(path, 50, i, parts):
            total.update(c)
    assert total == Counter(path.read_text().split())


def test_chunk_pairs_combine_per_key_into_columns_up_to_a_number_of_keys() -> None:
    from hosts.ask.spark import chunk_pairs

    big = 2**31 - 1
    pairs = [("a", big), ("a", 1), ("b", 2), ("a", 3), ("b", -5), ("c", 1)]

    def plain(chunks_: Any) -> list[dict[object, int]]:
        return [dict(zip(k, v.tolist(), strict=True)) for k, v in chunks_]

    assert plain(chunk_pairs(pairs)) == [{"a": big + 4, "b": -3, "c": 1}]
    assert plain(chunk_pairs(pairs, keys=2, step=2)) == [{"a": big + 4, "b": 2}, {"b": -5, "c": 1}]
    assert plain(chunk_pairs(pairs, keys=1, step=4)) == [{"a": big + 4, "b": 2}, {"b": -5, "c": 1}]
    assert list(chunk_pairs([], keys=2)) == []


def test_a_rows_packets_are_as_few_as_its_busiest_column_allows() -> None:
    from hosts.ask.mapper import MapperConfig

    m = MapperFlow(MapperConfig(job_id=1, flow=0, part_base=0, part_size=1, window=64))
    keys = [f"k{i}" for i in range(40)]  # one row: 40 keys over its 16 columns
    m.add_counts({k: 5 for k in keys})
    m.add_counts({k: 1 for k in keys[-4:]})  # again: added in the packets being built
    m.flush()
    per_column = Counter(place(fingerprint(k), 0, 1)[1] for k in keys)
    packets = m.to_send(0.0)
    assert len(packets) == max(per_column.values())
    got: Counter[int] = Counter()
    for p in packets:
        _, ks, vs = parse(p)
        got.update({int(k): int(v) for k, v in zip(ks, vs, strict=True) if k})
    assert got == {fingerprint(k): 5 + (k in keys[-4:]) for k in keys}


def test_at_most_switch_keys_of_a_chunk_go_through_the_switch_its_most_counted() -> None:
    np = pytest.importorskip("numpy")
    from hosts.ask.mapper import MapperConfig
    from wire.header import Flag

    cfg = MapperConfig(job_id=1, flow=0, part_base=0, part_size=4, window=64, hot_threshold=2,
                       switch_keys=2)  # fmt: skip
    m = MapperFlow(cfg)
    m.add_columns(["a", "b", "c", "d", "e"], np.array([5, 1, 3, 2, 9]))
    through: set[int] = set()
    bypass: set[int] = set()
    for p in m.to_send(0.0):
        h, ks, _ = parse(p)
        (bypass if h.flags & Flag.FALLBACK else through).update(int(k) for k in ks if k)
    assert through == {fingerprint("e"), fingerprint("a")}  # the two most counted
    assert bypass == {fingerprint(k) for k in "bcd"}  # "b" under the threshold, "c", "d" beyond
    assert (m.stats.switch_tuples, m.stats.bypass_tuples) == (2, 3)


def test_a_task_is_its_hosts_only_mapper_and_a_second_task_there_is_refused() -> None:
    from hosts.ask.spark_arrow import needs_barrier, task_flow

    ips = ["127.0.0.1", "192.0.2.9"]  # one mapper per host: no barrier stage
    assert not needs_barrier(ips) and needs_barrier([*ips, "127.0.0.1"])
    w, claim = task_flow(ips, partition=1, reducer_ip="127.0.0.1", job_id=77)
    assert w == 0 and claim is not None  # this host's mapper, whatever the partition
    try:
        with pytest.raises(ValueError, match="another task runs this host's mapper"):
            task_flow(ips, partition=0, reducer_ip="127.0.0.1", job_id=77)
    finally:
        claim.close()
    w, claim = task_flow(ips, partition=0, reducer_ip="127.0.0.1", job_id=77)  # free again
    assert w == 0 and claim is not None
    claim.close()


def test_cold_keys_kept_for_the_host_travel_by_key_not_in_packets() -> None:
    np = pytest.importorskip("numpy")
    from hosts.ask.mapper import MapperConfig

    cfg = MapperConfig(job_id=1, flow=0, part_base=0, part_size=4, window=64, hot_threshold=2,
                       cold_to_host=True)  # fmt: skip
    m = MapperFlow(cfg)
    m.add_columns(["a", "b", "c"], np.array([5, 1, 3]))
    m.add_columns(["b", "a"], np.array([1, 1]))  # "a" cold in this chunk, hot in the first
    sent = [parse(p) for p in m.to_send(0.0)]
    assert {int(k) for _, ks, _ in sent for k in ks if k} == {fingerprint("a"), fingerprint("c")}
    assert m.cold == {"b": 2, "a": 1} and m.sent == {"a": 5, "c": 3}  # exact, none twice
    assert m.counts_for([fingerprint("a")]) == {"a": 5}  # what went through the switch only
    assert m.stats.bypass_tuples == 3 and "b" not in m._fp  # no fingerprint for "b"


def test_a_mapper_process_imports_no_reducer_code_and_a_reducer_no_mapper_code() -> None:
    import subprocess
    import sys

    def loaded(role: str) -> set[str]:
        # what `python -m hosts.ask.run ROLE` has imported once it has picked its role
        code = ("import sys, hosts.ask.run as r; r.main(sys.argv[1:]); print(' '.join("
                "m for m in sys.modules if m.startswith('hosts.ask.')))")  # fmt: skip
        out = subprocess.run([sys.executable, "-c", code, role, "--controller", "unix:/none"],
                             capture_output=True, text=True, check=False)  # fmt: skip
        return set(out.stdout.split())

    mapper, reducer = loaded("mapper"), loaded("reducer")
    assert "hosts.ask.mapper_process" in mapper and "hosts.ask.reducer_process" not in mapper
    assert "hosts.ask.reducer_process" in reducer and "hosts.ask.mapper_process" not in reducer
    from hosts.ask import run

    assert run.send_partition.__module__ == "hosts.ask.mapper_process"  # the old names still


def test_the_group_by_goal_is_against_the_fastest_of_sparks_shuffles() -> None:
    from topologies.ask_cluster import GROUPBY_PATHS, summary

    times = {"spark_df": 9.0, "spark_text": 8.0, "arrow_shuffle": 6.0, "switch_arrow": 5.0,
             "switch_lines": 4.5}  # fmt: skip
    gb: dict[str, Any] = {"rows": 10, "keys": 3}
    for k in GROUPBY_PATHS:
        gb[f"{k}_s"], gb[f"{k}_exact"] = times[k], True
    rec = {"executors": 4, "bw_mbps": 100, "cluster_start_s": 1.0, "wordcount": [],
           "groupby": [gb], "left_running": [], "table_keys": 10**6,
           "table_alpha": 1.2}  # fmt: skip
    text = summary(rec)
    # the Arrow map side with Spark's own shuffle is the fastest baseline: 6.0 / 4.5
    assert "fastest Spark shuffle (arrow_shuffle) / faster switch (switch_lines) 1.33x" in text
    assert "NOT met" in text and "Zipf 1.2 over 1000000" in text
