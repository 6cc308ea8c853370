"""How join-plan and the Spark commands (join, scan, ingest) show their results, and the lines
of `join --explain`. The partition helper join-plan needs is imported inside its view, so that
`lancens --help` starts without pyarrow or Lance."""

from __future__ import annotations

from typing import Any

from lancens_cli.cli.views.cells import would_prefix
from lancens_cli.cli.views.registry import View, summary, view
from lancens_cli.models import json_value
from lancens_cli.words import plural


@view("lancens_cli.service.join.plan.JoinPlan")
def join_plan_view(r: Any) -> View:
    """One row per group; when not compatible, one row per reason."""
    from lancens_cli.partition.rows import dotted

    if not r.compatible:
        return View(["reason"], [[reason] for reason in r.reasons], "join plan: not compatible")
    several = len(r.pairs) > 1
    labels = [relation.label for relation in r.current.relations]
    header = ["specs", "key"] if several else labels
    header += ["left", "left tables", "right", "right tables"]
    rows = []
    for g in r.groups:
        if several:
            key = ", ".join(f"{k}={json_value(v)}" for k, v in g.key.items())
            lead = [f"v{g.left_spec} x v{g.right_spec}", key]
        else:
            lead = [json_value(v) for v in g.key.values()]
        left = ", ".join(dotted(t.object_id) for t in g.left)
        right = ", ".join(dotted(t.object_id) for t in g.right)
        rows.append([*lead, len(g.left), left, len(g.right), right])
    c = r.counts()
    title = (
        f"join plan: {plural(c['groups'], 'group')} of {c['left_partitions']} left and "
        f"{plural(c['right_partitions'], 'right partition')}"
    )
    return View(header, rows, title)


@summary("lancens_cli.service.join.plan.JoinPlan")
def _join_plan_summary(r: Any) -> str:
    if not r.compatible:
        return f"not compatible: {r.reasons[0]}" if r.reasons else "not compatible"
    c = r.counts()
    return (
        f"compatible ({r.scope}): {plural(c['groups'], 'group')}, "
        f"{c['matched_groups']} with partitions on both sides"
    )


def join_explain_lines(r: Any) -> list[str]:
    """`join --explain`: how the join runs (the groups, or why it shuffles) and Spark's plan."""
    out: list[str] = []
    if r.job.spj:
        c = r.job.plan.counts()
        out.append(
            f"storage-partitioned join ({r.job.how}): {len(r.job.groups_work())} group(s) to "
            f"run in {r.job.tasks} task(s), of {c['groups']} group(s) of "
            f"{c['left_partitions']} left and {c['right_partitions']} right partition table(s)"
        )
        groups = join_plan_view(r.job.plan)
        out.append("\t".join(groups.columns))
        out += ["\t".join(str(v) for v in row) for row in groups.rows]
    else:
        out.append(f"shuffle join ({r.job.how}): the layouts do not allow SPJ")
        out += [f"  {reason}" for reason in r.job.fallback_reasons]
    out += ["", "== Physical Plan ==", r.plan_text]
    return out


@view("lancens_cli.pipeline.join.JoinRows")
def _join_rows(r: Any) -> View:
    more = f" (first {r.limit}; --limit to see more)" if r.more else ""
    return View(r.columns, [list(row) for row in r.rows], f"{len(r.rows)} row(s){more}")


@view("lancens_cli.pipeline.join.JoinCount")
def _join_count(r: Any) -> View:
    return View(["count"], [[r.count]])


@view("lancens_cli.pipeline.join.JoinFiles")
def _join_files(r: Any) -> View:
    return View(["path", "format", "rows", "files"], [[r.path, r.format, r.rows, r.files]])


@view("lancens_cli.pipeline.scan.ScanRows")
def _scan_rows(r: Any) -> View:
    return View(r.columns, [[json_value(v) for v in row] for row in r.rows], "rows")


@view("lancens_cli.pipeline.scan.ScanExplain")
def _scan_explain(r: Any) -> View:
    header = ["spec", "table", "version", "fragments", "rows", "lance filter", "location"]
    rows = [
        [
            "-" if t.spec_version is None else f"v{t.spec_version}",
            t.table,
            t.version if t.branch is None else f"{t.branch}@{t.version}",
            t.fragments,
            t.rows,
            t.filter or "",
            t.location,
        ]
        for t in r.tables
    ]
    return View(header, rows, "tables read")


@view("lancens_cli.pipeline.ingest.IngestResult")
def _ingest(r: Any) -> View:
    header = ["target", "mode", "rows", "partitions", "created", "manifest_version", "seconds"]
    version = r.manifest_version if r.table_version is None else r.table_version
    row = [
        r.target,
        would_prefix(r.dry_run) + r.mode,
        r.rows,
        len(r.partitions),
        r.created,
        version,
        round(r.seconds, 2),
    ]
    return View(header, [row], "ingest")


@summary("lancens_cli.pipeline.ingest.IngestResult")
def _ingest_summary(r: Any) -> str:
    verb = "would write" if r.dry_run else "wrote"
    where = (
        f"{plural(len(r.partitions), 'partition')} ({r.created} new)"
        if r.target == "partitioned"
        else f"table {r.target}"
    )
    version = (
        f", __manifest version {r.manifest_version}"
        if r.manifest_version is not None and not r.dry_run
        else ""
    )
    return f"{verb} {plural(r.rows, 'row')} into {where}{version} in {r.seconds:.1f} s"


# --- `lancens spark start|status|stop`: the warm Spark Connect server ---------------------------


def _uptime(seconds: float) -> str:
    """An uptime as a person reads it: "42 s", "5 min", "3 h 20 min", "2 d 4 h"."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if hours < 1:
        return f"{minutes} min"
    if days < 1:
        return f"{hours} h {minutes % 60} min"
    return f"{days} d {hours % 24} h"


@view("lancens_cli.pipeline.spark_server.ServerStarted")
def _server_started(r: Any) -> View:
    """The URL alone, so that `$(lancens spark start)` is the URL; the rest is on stderr."""
    return View(["url"], [[r.server.url]], "Spark Connect server")


@summary("lancens_cli.pipeline.spark_server.ServerStarted")
def _server_started_summary(r: Any) -> str:
    s = r.server
    if r.already_running:
        return (
            f"spark: already running (pid {s.pid}, {s.master}, up {_uptime(s.uptime_seconds())}); "
            "`lancens spark stop` stops it"
        )
    replaced = f"; replaced a stale record: {r.replaced}" if r.replaced else ""
    return (
        f"spark: started the Spark Connect server (pid {s.pid}, {s.master}); the Spark commands "
        f"use it until `lancens spark stop`; log: {s.log}{replaced}"
    )


@view("lancens_cli.pipeline.spark_server.ServerStatus")
def _server_status(r: Any) -> View:
    s = r.server
    columns = ["state", "url", "pid", "uptime", "master", "started_at", "python", "log"]
    row = ["running", s.url, s.pid, _uptime(r.uptime), s.master, s.started_at, s.python, s.log]
    return View(columns, [row], "Spark Connect server", optional=("python", "log", "started_at"))


@view("lancens_cli.pipeline.spark_server.ServerStopped")
def _server_stopped(r: Any) -> View:
    state = "stopped" if r.stopped_pids else "not running"
    url = r.server.url if r.server is not None else None
    pids = ", ".join(map(str, r.stopped_pids)) or None
    return View(["state", "pid", "url"], [[state, pids, url]])


@summary("lancens_cli.pipeline.spark_server.ServerStopped")
def _server_stopped_summary(r: Any) -> str:
    note = f" ({r.note}; record removed)" if r.note else ""
    if not r.stopped_pids:
        return f"spark: no Spark Connect server of `lancens spark start` was running{note}"
    pids = ", ".join(map(str, r.stopped_pids))
    return f"spark: stopped the Spark Connect server (pid {pids}){note}"
