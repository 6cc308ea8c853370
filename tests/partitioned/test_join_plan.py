"""`lancens join-plan`: storage partitioned join plans (the partitioning spec, SPJ and Appendix F).

Namespaces are built through the CLI as a user would (`add-partition-spec`, `write`); every
compatible plan is checked by joining group by group (each table read at its read_version) and
comparing with a brute-force join of all rows.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import invoke, run_cli

from lancens_cli.errors import InvalidInputError
from lancens_cli.schema_json import schema_to_json
from lancens_cli.service.join.plan import parse_on

# --- helpers ----------------------------------------------------------------------------------


def build(tmp_path: Path, name: str, table: pa.Table, fields: list[str], cli=invoke) -> str:
    """A partitioned namespace at tmp_path/name holding `table`, partitioned by `fields`."""
    root = tmp_path / name
    root.mkdir()
    data = tmp_path / f"{name}.parquet"
    pq.write_table(table, data)
    schema = tmp_path / f"{name}.schema.json"
    schema.write_text(json.dumps(schema_to_json(table.schema)))
    spec_args = [a for f in fields for a in ("--field", f)]
    done = cli("--root", str(root), "add-partition-spec", "--schema", str(schema), *spec_args)
    assert done.exit_code == 0, done.stderr
    write(root, data, cli)
    return str(root)


def write(root: Path | str, data: Path, cli=invoke) -> None:
    done = cli("--root", str(root), "write", "--from", str(data))
    assert done.exit_code == 0, done.stderr


def plan(left: str, right: str, *on: str, extra: tuple[str, ...] = (), cli=invoke) -> dict:
    args = [a for text in on for a in ("--on", text)]
    done = cli("join-plan", left, right, *args, *extra, "--json")
    assert done.exit_code == 0, done.stderr
    return done.json()


def read(tables: list[dict], options: dict | None = None) -> pa.Table | None:
    """The partition tables of one side of a group, each at its recorded read_version."""
    import lance

    parts = [
        lance.dataset(t["uri"], version=t["read_version"], storage_options=options).to_table()
        for t in tables
    ]
    return pa.concat_tables(parts) if parts else None


def rows(table: pa.Table) -> list[tuple]:
    names = sorted(table.column_names)
    return sorted(tuple(str(r[n]) for n in names) for r in table.to_pylist())


def join(left: pa.Table, right: pa.Table, left_keys: list[str], right_keys: list[str]):
    """Inner join keeping both sides' columns (l.x, r.x): the brute force reference."""
    left = left.rename_columns([f"l.{n}" for n in left.column_names])
    right = right.rename_columns([f"r.{n}" for n in right.column_names])
    return left.join(
        right,
        keys=[f"l.{k}" for k in left_keys],
        right_keys=[f"r.{k}" for k in right_keys],
        join_type="inner",
        coalesce_keys=False,
    )


def assert_plan_joins_exactly(
    result: dict,
    left: pa.Table,
    right: pa.Table,
    left_keys: list[str],
    right_keys: list[str],
    options: dict | None = None,
) -> None:
    """Joining group by group gives exactly the full (brute force) inner join."""
    left_seen, right_seen, table_pairs, joined = set(), set(), [], []
    for group in result["groups"]:
        lefts, rights = [t["table"] for t in group["left"]], [t["table"] for t in group["right"]]
        left_seen.update(lefts)
        right_seen.update(rights)
        table_pairs += [(a, b) for a in lefts for b in rights]
        lt, rt = read(group["left"], options), read(group["right"], options)
        if lt is not None and rt is not None:
            joined.append(join(lt, rt, left_keys, right_keys))
    # every partition table is planned, and no two tables are joined twice
    assert len(left_seen) == result["counts"]["left_partitions"]
    assert len(right_seen) == result["counts"]["right_partitions"]
    assert len(table_pairs) == len(set(table_pairs))
    full = join(left, right, left_keys, right_keys)
    assert full.num_rows > 0
    by_group = pa.concat_tables(joined) if joined else full.schema.empty_table()
    assert rows(by_group.select(full.column_names)) == rows(full)


def orders_and_customers() -> tuple[pa.Table, pa.Table]:
    rng = random.Random(4)
    orders = pa.table(
        {
            "order_id": pa.array(range(2000), pa.int64()),
            "customer_id": pa.array([rng.randrange(1200) for _ in range(2000)], pa.int64()),
            "amount": pa.array([rng.randrange(1, 10_000) / 100 for _ in range(2000)]),
        }
    )
    customers = pa.table(
        {
            "id": pa.array(range(1000), pa.int64()),
            "name": pa.array([f"customer {i}" for i in range(1000)]),
        }
    )
    return orders, customers


def keyed(n: int, seed: int = 1, regions=("eu", "us", "ap")) -> pa.Table:
    rng = random.Random(seed)
    return pa.table(
        {
            "k": pa.array([rng.randrange(300) for _ in range(n)], pa.int64()),
            "region": pa.array([rng.choice(regions) for _ in range(n)]),
            "v": pa.array(range(n), pa.int64()),
        }
    )


# --- Appendix F -------------------------------------------------------------------------------


def test_appendix_f_customers_bucket_i_pairs_orders_buckets_i_and_i_plus_8(tmp_path):
    orders, customers = orders_and_customers()
    left = build(
        tmp_path, "orders", orders, ["bucket(16, customer_id) as customer_bucket"], run_cli
    )
    right = build(tmp_path, "customers", customers, ["bucket(8, id) as id_bucket"], run_cli)

    result = plan(left, right, "l.customer_id = r.id", cli=run_cli)

    assert result["compatible"] is True
    assert result["reasons"] == []
    assert "current partition spec" in result["scope"]
    (key,) = result["keys"]
    (relation,) = key["relations"]
    assert relation["left_field"] == "customer_bucket"
    assert relation["right_field"] == "id_bucket"
    assert relation["relation"] == "bucket 8 divides 16"
    assert relation["left_value"] == "customer_bucket % 8"
    counts = result["counts"]
    assert (counts["left_partitions"], counts["right_partitions"]) == (16, 8)
    assert counts["groups"] == counts["matched_groups"] == 8
    assert len(result["groups"]) == 8
    for i, group in enumerate(result["groups"]):
        assert list(group["key"].values()) == [i]
        assert [t["values"]["id_bucket"] for t in group["right"]] == [i]
        assert sorted(t["values"]["customer_bucket"] for t in group["left"]) == [i, i + 8]
        for t in group["left"] + group["right"]:
            assert t["read_version"] >= 1 and t["location"] and t["uri"]
    assert_plan_joins_exactly(result, orders, customers, ["customer_id"], ["id"])


def test_the_plan_as_a_table_has_one_row_per_group(tmp_path):
    orders, customers = orders_and_customers()
    left = build(tmp_path, "orders", orders, ["bucket(16, customer_id) as customer_bucket"])
    right = build(tmp_path, "customers", customers, ["bucket(8, id) as id_bucket"])

    done = invoke("join-plan", left, right, "--on", "r.id = l.customer_id")

    assert done.exit_code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 8
    first = lines[0].split("\t")
    assert first[0] == "0" and first[1] == "2" and first[3] == "1"
    assert "compatible" in done.stderr


# --- compatibility rules ----------------------------------------------------------------------


def test_buckets_that_do_not_divide_are_not_compatible(tmp_path):
    left = build(tmp_path, "l", keyed(400), ["bucket(16, k) as kb"])
    right = build(tmp_path, "r", keyed(400, 2), ["bucket(6, k) as kb"])

    result = plan(left, right, "l.k = r.k")

    assert result["compatible"] is False
    assert result["groups"] == []
    (reason,) = result["reasons"]
    assert reason.startswith("l.k = r.k: ")
    assert "neither count divides the other" in reason
    assert result["keys"][0]["used"] is False


def test_different_transforms_are_not_compatible(tmp_path):
    left = build(tmp_path, "l", keyed(100), ["bucket(8, k) as kb"])
    right = build(tmp_path, "r", keyed(100, 2), ["truncate(10, k) as kt"])

    result = plan(left, right, "l.k = r.k")

    assert result["compatible"] is False
    (reason,) = result["reasons"]
    assert "different transforms" in reason and "\n" not in reason


def test_a_key_partitioned_on_one_side_only_is_not_compatible(tmp_path):
    left = build(tmp_path, "l", keyed(100), ["region"])
    right = build(tmp_path, "r", keyed(100, 2), ["bucket(4, k) as kb"])

    result = plan(left, right, "l.k = r.k")

    assert result["compatible"] is False
    assert result["reasons"] == ["l.k = r.k: not partitioned on the left side"]


def test_same_identity_pairs_partitions_with_equal_values(tmp_path):
    left_data = keyed(200, 1, ("eu", "us", "ap"))
    right_data = keyed(200, 2, ("us", "ap", "sa"))
    left = build(tmp_path, "l", left_data, ["region"])
    right = build(tmp_path, "r", right_data, ["region"])

    result = plan(left, right, "l.region = r.region")

    assert result["compatible"] is True
    assert result["keys"][0]["relations"][0]["relation"] == "same"
    by_key = {g["key"]["region"]: g for g in result["groups"]}
    assert sorted(by_key) == ["ap", "eu", "sa", "us"]
    for value, group in by_key.items():
        for t in group["left"] + group["right"]:
            assert t["values"]["region"] == value
    assert [len(by_key["eu"]["left"]), len(by_key["eu"]["right"])] == [1, 0]
    assert [len(by_key["sa"]["left"]), len(by_key["sa"]["right"])] == [0, 1]
    assert result["counts"]["matched_groups"] == 2
    assert_plan_joins_exactly(result, left_data, right_data, ["region"], ["region"])


def events(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    start = dt.datetime(2023, 1, 1)
    times = [start + dt.timedelta(hours=rng.randrange(2 * 365 * 24)) for _ in range(n)]
    return pa.table(
        {"ts": pa.array(times, pa.timestamp("us")), "e": pa.array(range(n), pa.int64())}
    )


def test_year_against_year_and_month_groups_by_year(tmp_path):
    left_data, right_data = events(600, 1), events(300, 2)
    left = build(tmp_path, "l", left_data, ["year(ts) as y", "month(ts) as m"])
    right = build(tmp_path, "r", right_data, ["year(ts) as y"])

    result = plan(left, right, "l.ts = r.ts")

    assert result["compatible"] is True
    assert [r["relation"] for r in result["keys"][0]["relations"]] == ["same"]
    assert result["other_fields"] == {"left": ["m = month(ts)"], "right": []}
    assert any("do not prevent SPJ" in note for note in result["notes"])
    assert [g["key"]["year(ts)"] for g in result["groups"]] == [2023, 2024]
    for group in result["groups"]:
        year = group["key"]["year(ts)"]
        assert [t["values"]["y"] for t in group["right"]] == [year]
        assert sorted(t["values"]["m"] for t in group["left"]) == list(range(1, 13))
        assert {t["values"]["y"] for t in group["left"]} == {year}
    assert_plan_joins_exactly(result, left_data, right_data, ["ts"], ["ts"])


def test_a_finer_time_part_alone_does_not_group_into_a_coarser_one(tmp_path):
    left = build(tmp_path, "l", events(50, 1), ["day(ts) as d"])
    right = build(tmp_path, "r", events(50, 2), ["month(ts) as m"])

    result = plan(left, right, "l.ts = r.ts")

    assert result["compatible"] is False
    (reason,) = result["reasons"]
    assert "only when the left side is also partitioned by month" in reason


def test_truncate_widths_that_divide_are_compatible(tmp_path):
    left_data, right_data = keyed(300, 1), keyed(300, 2)
    left = build(tmp_path, "l", left_data, ["truncate(10, k) as kt"])
    right = build(tmp_path, "r", right_data, ["truncate(50, k) as kt"])

    result = plan(left, right, "l.k = r.k")

    assert result["compatible"] is True
    relation = result["keys"][0]["relations"][0]
    assert relation["relation"] == "truncate 10 divides 50"
    assert relation["left_value"] == "kt - (kt % 50)"
    for group in result["groups"]:
        assert len(group["left"]) <= 5
        assert len(group["right"]) <= 1
    assert_plan_joins_exactly(result, left_data, right_data, ["k"], ["k"])

    other = build(tmp_path, "o", right_data, ["truncate(15, k) as kt"])
    assert plan(left, other, "l.k = r.k")["compatible"] is False


def test_string_truncates_pair_by_the_shorter_prefix(tmp_path):
    words = ["alpha", "alps", "beta", "bet", "gamma", "gam", "delta"]
    left_data = pa.table({"w": words * 3, "n": list(range(21))})
    right_data = pa.table({"w": words[::-1], "m": list(range(7))})
    left = build(tmp_path, "l", left_data, ["truncate(4, w) as w4"])
    right = build(tmp_path, "r", right_data, ["truncate(2, w) as w2"])

    result = plan(left, right, "l.w = r.w")

    assert result["compatible"] is True
    assert [g["key"]["truncate(2, w)"] for g in result["groups"]] == ["al", "be", "de", "ga"]
    assert_plan_joins_exactly(result, left_data, right_data, ["w"], ["w"])


def test_multi_bucket_needs_the_same_columns_in_the_same_order(tmp_path):
    left_data, right_data = keyed(300, 1), keyed(300, 2)
    left = build(tmp_path, "l", left_data, ["multi_bucket(4, k, region) as mb"])
    right = build(tmp_path, "r", right_data, ["multi_bucket(4, k, region) as mb"])
    swapped = build(tmp_path, "s", right_data, ["multi_bucket(4, region, k) as mb"])

    result = plan(left, right, "l.k = r.k", "l.region = r.region")

    assert result["compatible"] is True
    assert len(result["groups"]) == 4
    assert_plan_joins_exactly(result, left_data, right_data, ["k", "region"], ["k", "region"])
    refused = plan(left, swapped, "l.k = r.k", "l.region = r.region")
    assert refused["compatible"] is False
    assert len(refused["reasons"]) == 2
    assert all("another order" in r for r in refused["reasons"])


def test_fields_off_the_join_keys_only_split_partitions(tmp_path):
    left_data, right_data = keyed(400, 1), keyed(300, 2)
    left = build(tmp_path, "l", left_data, ["bucket(4, k) as kb", "region"])
    right = build(tmp_path, "r", right_data, ["bucket(4, k) as kb"])

    result = plan(left, right, "l.k = r.k")

    assert result["compatible"] is True
    assert result["other_fields"]["left"] == ["region = region"]
    assert len(result["groups"]) == 4
    assert all(len(g["left"]) == 3 and len(g["right"]) == 1 for g in result["groups"])
    assert_plan_joins_exactly(result, left_data, right_data, ["k"], ["k"])


def test_a_join_key_without_partitioning_is_reported_but_others_still_pair(tmp_path):
    left_data, right_data = keyed(300, 1), keyed(300, 2)
    left = build(tmp_path, "l", left_data, ["bucket(4, k) as kb"])
    right = build(tmp_path, "r", right_data, ["bucket(8, k) as kb", "region"])

    result = plan(left, right, "l.k = r.k", "l.region = r.region")

    assert result["compatible"] is True
    assert [k["used"] for k in result["keys"]] == [True, False]
    assert result["reasons"] == [
        "l.region = r.region: not partitioned on the left side (not used for pairing)"
    ]
    assert_plan_joins_exactly(result, left_data, right_data, ["k", "region"], ["k", "region"])


def test_older_spec_versions_are_reported_or_planned_with_all_versions(tmp_path):
    first, second, right_data = keyed(200, 1), keyed(200, 3), keyed(300, 2)
    left = build(tmp_path, "l", first, ["bucket(4, k) as kb4"])
    done = invoke("--root", left, "add-partition-spec", "--field", "bucket(8, k) as kb8")
    assert done.exit_code == 0, done.stderr
    pq.write_table(second, tmp_path / "second.parquet")
    write(left, tmp_path / "second.parquet")
    right = build(tmp_path, "r", right_data, ["bucket(8, k) as kb"])

    current = plan(left, right, "l.k = r.k")
    assert current["compatible"] is True
    assert current["left"]["spec_versions_planned"] == [2]
    assert current["counts"]["left_not_covered"] == 4
    assert any("older specs (v1)" in note for note in current["notes"])

    every = plan(left, right, "l.k = r.k", extra=("--all-versions",))
    assert every["compatible"] is True
    assert [(p["left_spec"], p["right_spec"]) for p in every["spec_pairs"]] == [(2, 1), (1, 1)]
    assert every["counts"]["left_not_covered"] == 0
    assert every["counts"]["left_partitions"] == 12
    assert_plan_joins_exactly(every, pa.concat_tables([first, second]), right_data, ["k"], ["k"])


# --- errors -----------------------------------------------------------------------------------


def test_an_unknown_column_is_a_usage_error_on_one_line(tmp_path):
    left = build(tmp_path, "l", keyed(20), ["bucket(4, k) as kb"])
    right = build(tmp_path, "r", keyed(20, 2), ["bucket(4, k) as kb"])

    done = run_cli("join-plan", left, right, "--on", "l.k = r.nope")

    assert done.exit_code == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "'nope'" in done.stderr and "right" in done.stderr
    assert "Traceback" not in done.stderr

    as_json = run_cli("join-plan", left, right, "--on", "l.k = r.nope", "--json")
    assert as_json.exit_code == 2
    assert json.loads(as_json.stderr)["error"]["name"] == "InvalidInput"


@pytest.mark.parametrize("text", ["k = k", "l.k = l.k", "l.k", "l. = r.k", "x.k = r.k"])
def test_bad_on_syntax_is_a_usage_error(tmp_path, text):
    left = build(tmp_path, "l", keyed(20), ["bucket(4, k) as kb"])
    done = invoke("join-plan", left, left, "--on", text)
    assert done.exit_code == 2
    assert "--on" in done.stderr


def test_roots_that_are_not_partitioned_or_missing(tmp_path):
    left = build(tmp_path, "l", keyed(20), ["bucket(4, k) as kb"])
    plain = tmp_path / "plain"
    plain.mkdir()

    not_partitioned = invoke("join-plan", left, str(plain), "--on", "l.k = r.k")
    assert not_partitioned.exit_code == 2
    assert "right root" in not_partitioned.stderr
    assert "not a partitioned namespace" in not_partitioned.stderr

    missing = invoke("join-plan", str(tmp_path / "nothing"), left, "--on", "l.k = r.k")
    assert missing.exit_code == 3
    assert "left:" in missing.stderr


def test_parse_on():
    assert parse_on("l.a = r.b") == ("a", "b")
    assert parse_on("r.b=l.a") == ("a", "b")
    assert parse_on('L."my col" = R.`x`') == ("my col", "x")
    with pytest.raises(InvalidInputError):
        parse_on("r.a = r.b")


def test_storage_options_apply_to_both_roots_on_s3(tmp_path, s3_bucket, s3_options):
    options = [a for k, v in s3_options.items() for a in ("-s", f"{k}={v}")]
    left_data, right_data = keyed(200, 1), keyed(200, 2)
    roots = []
    for name, data, field in (("l", left_data, "bucket(8, k)"), ("r", right_data, "bucket(4, k)")):
        root = f"s3://{s3_bucket}/{name}"
        parquet = tmp_path / f"{name}.parquet"
        pq.write_table(data, parquet)
        for args in (
            ("add-partition-spec", "--schema", str(parquet), "--field", field),
            ("write", "--from", str(parquet)),
        ):
            done = invoke("--root", root, *options, *args)
            assert done.exit_code == 0, done.stderr
        roots.append(root)

    done = invoke("join-plan", *roots, "--on", "l.k = r.k", "--json", *options)

    assert done.exit_code == 0, done.stderr
    result = done.json()
    assert result["compatible"] is True
    assert result["left"]["root"] == roots[0] and result["right"]["root"] == roots[1]
    assert all(t["uri"].startswith(roots[0] + "/") for g in result["groups"] for t in g["left"])
    assert s3_options["secret_access_key"] not in done.stdout
    assert_plan_joins_exactly(result, left_data, right_data, ["k"], ["k"], s3_options)
