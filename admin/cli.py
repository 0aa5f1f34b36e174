"""The admin subcommands of `kbroker`, registered by broker/cli.py through `register`.

    kbroker topic create|list|describe|alter|delete
    kbroker group list|describe|reset-offsets|delete|delete-offsets|history|wait
    kbroker test rebalance|expire-member|expire-sessions|not-coordinator|join-delay|fail|drop-connections|
                 run-retention|reset          (kbroker only, with --test-controls)
    kbroker test cluster|node-stop|node-start|node-add|move-leader|shuffle-leaders|elect-preferred|move-coordinator
                 |cut-off|requests
                                              (kbroker --nodes N, with --test-controls)

As Kafka's tools where they overlap: `reset-offsets` shows its plan unless `--execute` is given
(kafka-consumer-groups.sh), an unknown group or topic exits 1, and a command on several topics or
groups does what it can and lists what failed (exit 1). Output is a table, or JSON with `--json`.
The HTTP endpoint (history, test controls) is the one the broker reports (admin/endpoint.py).

Errors print one line naming the broker, group or topic and exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .client import Admin, AdminError
from .output import emit, table, utc

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TOKEN_FILE = "test-controls.token"  # the broker writes it (broker/security/http_guard.py); the CLI reads it


class PartlyFailed(AdminError):
    """Some of the topics or groups a command named failed: the output lists each, this says which."""


def _common(p: argparse.ArgumentParser, *, http: bool = False,
            timeout_help: str = "seconds to wait for an answer (default 10)", timeout: float = 10.0) -> None:
    p.add_argument("-b", "--bootstrap-server", default=os.environ.get("KBROKER_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                   help=f"HOST:PORT of any broker (env KBROKER_BOOTSTRAP; default {DEFAULT_BOOTSTRAP})")
    if http:
        p.add_argument("--admin-url", default=None,
                       help="kbroker's HTTP endpoint, its --metrics-listen (env KBROKER_ADMIN_URL; default: the one "
                            "the broker at -b reports)")
    p.add_argument("--timeout", type=float, default=timeout, help=timeout_help)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _admin_url(args: argparse.Namespace) -> str:
    from .endpoint import admin_url

    return admin_url(args.admin_url, args.bootstrap_server, args.timeout)


def _quiet_admin_url(args: argparse.Namespace) -> str | None:
    """The endpoint for optional extras (why a group waits): None when there is none."""
    try:
        return _admin_url(args)
    except AdminError:
        return None


def register(sub: Any) -> None:
    topic = sub.add_parser("topic", help="create, list, describe, alter, delete topics (any Kafka broker)")
    tsub = topic.add_subparsers(dest="action", required=True)
    p = tsub.add_parser("list", help="topics and their partition counts")
    p.add_argument("--internal", action="store_true", help="include internal topics")
    _common(p)
    p.set_defaults(admin_main=_topic_list)
    p = tsub.add_parser("create", help="create a topic")
    p.add_argument("name")
    p.add_argument("-p", "--partitions", type=int, default=-1,
                   help="partition count (default: the broker's num.partitions)")
    p.add_argument("-r", "--replication-factor", type=int, default=-1,
                   help="replicas per partition (default: the broker's default.replication.factor)")
    p.add_argument("-c", "--config", action="append", metavar="NAME=VALUE", help="topic config (repeatable)")
    _common(p)
    p.set_defaults(admin_main=_topic_create)
    p = tsub.add_parser("describe", help="partitions (leader, offsets) and configs of a topic, those set on it "
                                         "marked as kafka-topics.sh --describe lists them")
    p.add_argument("name")
    _common(p)
    p.set_defaults(admin_main=_topic_describe)
    p = tsub.add_parser("alter", help="add partitions, set or delete configs")
    p.add_argument("name")
    p.add_argument("-p", "--partitions", type=int, help="new total partition count")
    p.add_argument("-c", "--config", action="append", metavar="NAME=VALUE", help="set a config (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="NAME", default=[], help="back to the default")
    _common(p)
    p.set_defaults(admin_main=_topic_alter)
    p = tsub.add_parser("delete", help="delete topics")
    p.add_argument("names", nargs="+")
    _common(p)
    p.set_defaults(admin_main=_topic_delete)

    group = sub.add_parser("group", help="list, describe (lag), reset offsets, delete groups; history; wait")
    gsub = group.add_subparsers(dest="action", required=True)
    p = gsub.add_parser("list", help="groups with their state")
    _common(p)
    p.set_defaults(admin_main=_group_list)
    p = gsub.add_parser("describe", help="state, members, assignment, committed offset, log end and lag")
    p.add_argument("group")
    _common(p, http=True)
    p.set_defaults(admin_main=_group_describe)
    p = gsub.add_parser("reset-offsets", help="plan, or with --execute commit, new offsets (the group must be empty)")
    p.add_argument("group")
    p.add_argument("--topic", required=True, help="TOPIC or TOPIC:P1,P2")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_const", dest="to", const="earliest")
    target.add_argument("--to-latest", action="store_const", dest="to", const="latest")
    target.add_argument("--to-datetime", metavar="TIME", help="ISO 8601 (UTC if no zone) or epoch ms")
    target.add_argument("--to-offset", metavar="N")
    target.add_argument("--shift-by", metavar="N")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="commit the new offsets (without it: only the plan, "
                                                             "as kafka-consumer-groups.sh)")
    mode.add_argument("--dry-run", action="store_true", help="show the plan only (the default)")
    p.add_argument("--share", action="store_true", help="a share group's start offsets (AlterShareGroupOffsets, "
                   "as kafka-share-groups.sh); needed only for a group that does not exist yet")
    _common(p)
    p.set_defaults(admin_main=_group_reset)
    p = gsub.add_parser("delete", help="delete groups (they must be empty)")
    p.add_argument("groups", nargs="+")
    _common(p)
    p.set_defaults(admin_main=_group_delete)
    p = gsub.add_parser("delete-offsets", help="delete a group's committed offsets of a topic (a share group's: "
                        "its share-partitions' states)")
    p.add_argument("group")
    p.add_argument("--topic", required=True, help="TOPIC or TOPIC:P1,P2")
    _common(p)
    p.set_defaults(admin_main=_group_delete_offsets)
    p = gsub.add_parser("history", help="the group's last rebalances, from kbroker's HTTP endpoint")
    p.add_argument("group")
    _common(p, http=True)
    p.set_defaults(admin_main=_group_history)
    p = gsub.add_parser("wait", help="return once the group exists with --members N and/or is --stable "
                                     "(instead of a sleep)")
    p.add_argument("group")
    p.add_argument("--members", type=int, default=None, help="the member count to wait for")
    p.add_argument("--stable", action="store_true", help="and the group Stable")
    _common(p, http=True, timeout=30.0, timeout_help="seconds to wait for the group (default 30)")
    p.set_defaults(admin_main=_group_wait)

    _register_test_controls(sub)


def _register_test_controls(sub: Any) -> None:
    test = sub.add_parser("test", help="kbroker's test controls (broker started with --test-controls)")
    xsub = test.add_subparsers(dest="action", required=True)

    def control(name: str, help_text: str, path: str, *args: tuple[str, dict], body=None) -> None:
        p = xsub.add_parser(name, help=help_text)
        for flag, kw in args:
            p.add_argument(flag, **kw)
        _common(p, http=True)
        p.add_argument("--token", default=os.environ.get("KBROKER_TEST_CONTROLS_TOKEN"),
                       help="the broker's test-controls token (env KBROKER_TEST_CONTROLS_TOKEN; default: read from "
                            f"--data-dir's {TOKEN_FILE})")
        p.add_argument("--data-dir", default=os.environ.get("KBROKER_DATA_DIR", "./data"),
                       help="the broker's data directory, where it wrote its token (env KBROKER_DATA_DIR; "
                            "default ./data)")
        p.set_defaults(admin_main=_test_control, path=path, body=body or (lambda a: {}))

    control("rebalance", "force a group to rebalance", "groups/{group}/rebalance",
            ("group", {}), ("--reason", {"default": "requested by kbroker test rebalance"}),
            body=lambda a: {"reason": a.reason})
    control("expire-member", "expire one member's session now", "groups/{group}/members/{member}/expire",
            ("group", {}), ("member", {}))
    control("expire-sessions", "expire every session of a group now", "groups/{group}/expire-sessions",
            ("group", {}))
    control("not-coordinator", "answer NOT_COORDINATOR for the group for N seconds (a coordinator move)",
            "groups/{group}/not-coordinator", ("group", {}), ("--seconds", {"type": float, "default": 10.0}),
            body=lambda a: {"seconds": a.seconds})
    control("join-delay", "delay the group's JoinGroup answers by N ms (0 ends it)", "groups/{group}/join-delay",
            ("group", {}), ("--ms", {"type": int, "required": True}), body=lambda a: {"ms": a.ms})
    control("fail", "make the next K requests of an API for the group fail with a Kafka error",
            "groups/{group}/fail", ("group", {}), ("--api", {"required": True, "help": "e.g. Heartbeat"}),
            ("--count", {"type": int, "default": 1}), ("--error", {"default": "COORDINATOR_NOT_AVAILABLE"}),
            body=lambda a: {"api": a.api, "count": a.count, "error": a.error})
    control("fail-partition", "make the next K Produce or Fetch requests of a partition (or a coordinator's "
            "appends to it: Append) fail with a Kafka error",
            "topics/{topic}/partitions/{partition}/fail", ("topic", {}), ("partition", {"type": int}),
            ("--api", {"required": True, "choices": ["Produce", "Fetch", "Append"]}), ("--count", {"type": int, "default": 1}),
            ("--error", {"default": "NOT_LEADER_OR_FOLLOWER"}),
            body=lambda a: {"api": a.api, "count": a.count, "error": a.error})
    control("drop-connections", "close a client's connections (every client's without --client-id)",
            "connections/drop", ("--client-id", {"default": None}), body=lambda a: {"client_id": a.client_id})
    control("run-retention", "run offsets retention, log retention or compaction now", "retention/run",
            ("what", {"choices": ["offsets", "logs", "compaction"]}), body=lambda a: {"what": a.what})
    control("reset", "empty the broker: every non-internal topic, group and offset", "reset")
    # several nodes in one process (kbroker serve --nodes N): docs/cluster.md
    control("cluster", "the nodes of a --nodes N broker: up or down, listeners, leaderships", "cluster/describe")
    control("node-stop", "stop a node: its listeners close, its leaderships move to an in-sync replica",
            "cluster/nodes/{node}/stop", ("node", {"type": int}))
    control("node-start", "start a stopped node again on the same ports", "cluster/nodes/{node}/start",
            ("node", {"type": int}))
    control("move-leader", "move a partition's leader (default: to the next in-sync replica)",
            "cluster/partitions/{topic}/{partition}/leader", ("topic", {}), ("partition", {"type": int}),
            ("--node", {"type": int, "default": None}), body=lambda a: {"node": a.node})
    control("shuffle-leaders", "move every partition's leader to another in-sync replica at random",
            "cluster/shuffle", ("--seed", {"type": int, "default": None}), body=lambda a: {"seed": a.seed})
    control("elect-preferred", "move every partition's leader back to its first replica", "cluster/elect-preferred")
    control("move-coordinator", "move a group's coordinator (its __consumer_offsets partition's leader)",
            "cluster/groups/{group}/coordinator", ("group", {}), ("--node", {"type": int, "default": None}),
            body=lambda a: {"node": a.node})
    control("node-add", "add a node (the next id, on the next ports)", "cluster/nodes/add")
    control("cut-off", "cut one client (by client id) off from one node; --mend reconnects it",
            "cluster/nodes/{node}/cut-off", ("node", {"type": int}), ("client_id", {}),
            ("--mend", {"action": "store_true"}), body=lambda a: {"client_id": a.client_id, "cut": not a.mend})
    control("requests", "the requests each node was sent, by API", "cluster/requests")


def run(args: argparse.Namespace) -> int:
    try:
        args.admin_main(args)
    except AdminError as e:
        print(f"kbroker {args.command} {args.action}: {e}", file=sys.stderr)
        return 1
    return 0


def _admin(args: argparse.Namespace) -> Admin:
    return Admin(args.bootstrap_server, args.timeout)


def _topic_list(args) -> None:
    from . import topics

    with _admin(args) as admin:
        emit(topics.list_topics(admin, args.internal), args.json, table)


def _topic_create(args) -> None:
    from . import topics

    with _admin(args) as admin:
        emit(topics.create_topic(admin, args.name, args.partitions, args.replication_factor,
                                 topics.parse_configs(args.config)), args.json, table)


def _topic_describe(args) -> None:
    from . import topics

    def render(d: dict) -> None:
        rf = len(d["partitions"][0]["replicas"]) if d["partitions"] else 0
        print(f"Topic {d['topic']}  id {d['topic_id']}  partitions {len(d['partitions'])}  replication factor {rf}")
        # kafka-topics.sh --describe lists the configs not at Kafka's default; `*` marks those set on
        # the topic itself (kafka-configs.sh's dynamic configs), the rest come from the broker's settings
        print("Configs: " + (",".join(f"{k}={d['configs'][k]}" + ("*" if k in d["overrides"] else "")
                                      for k in d["configs"] if d["config_sources"][k] != "DEFAULT_CONFIG") or "-")
              + ("   (* set on this topic)" if d["overrides"] else ""))
        # leader, replicas and ISR as kafka-topics.sh --describe prints them (node ids, comma-separated)
        table([{**p, "replicas": ",".join(map(str, p["replicas"])), "isr": ",".join(map(str, p["isr"])),
                "offline": ",".join(map(str, p["offline"])) or "-"} for p in d["partitions"]])
        print()
        table([{"config": k + ("*" if k in d["overrides"] else ""), "value": v, "source": d["config_sources"][k]}
               for k, v in d["configs"].items()])

    with _admin(args) as admin:
        emit(topics.describe_topic(admin, args.name), args.json, render)


def _topic_alter(args) -> None:
    from . import topics

    with _admin(args) as admin:
        emit(topics.alter_topic(admin, args.name, args.partitions, topics.parse_configs(args.config),
                                args.delete_config), args.json, table)


def _topic_delete(args) -> None:
    from . import topics

    with _admin(args) as admin:
        rows = topics.delete_topics(admin, args.names)
    _emit_all_or_fail(rows, args, "topic", "deleted")


def _emit_all_or_fail(rows: list[dict], args, kind: str, done: str) -> None:
    """Print every row, then fail naming the ones that did not succeed (the others did)."""
    emit(rows, args.json, table)
    failed = [r for r in rows if not r[done]]
    if failed:
        names = ", ".join(f"{r[kind]} ({r['error']})" for r in failed)
        raise PartlyFailed(f"{len(failed)} of {len(rows)} {kind}s not {done}: {names}")


def _group_list(args) -> None:
    from . import groups

    with _admin(args) as admin:
        emit(groups.list_groups(admin), args.json, table)


def _group_describe(args) -> None:
    from . import groups

    def render(d: dict) -> None:
        print(f"Group {d['group']}  state {d['state']}  protocol {d['protocol_type'] or '-'}/{d['protocol'] or '-'}"
              f"  members {len(d['members'])}  total lag {d['total_lag']}")
        streams = ["active_tasks", "standby_tasks"] if d["protocol_type"] == "streams" else []
        table(d["members"], ["member_id", "client_id", "host", "group_instance_id", "assignment", *streams])
        print()
        if d["protocol_type"] == "share":  # share-partitions: a start offset, and members that share them
            table(d["partitions"], ["topic", "partition", "start", "log_end", "lag", "members"])
        else:
            table(d["partitions"], ["topic", "partition", "committed", "log_end", "lag", "member"])
        stuck = d.get("rebalance_in_progress")
        if stuck:
            print(f"\nRebalancing since {utc(stuck['started_ms'])}: {stuck['reason']}; {stuck['why']}")

    with _admin(args) as admin:
        described = groups.describe_group(admin, args.group)
    if described["state"] in ("PreparingRebalance", "CompletingRebalance"):
        # kbroker (with --metrics-listen) also says why; any other broker: the protocol view only
        url = _quiet_admin_url(args)
        try:
            if url is not None:
                status = groups.http_json(url, f"/v1/groups/{args.group}", timeout_s=1.0)
                described["rebalance_in_progress"] = status.get("rebalance_in_progress")
        except AdminError:
            pass
    emit(described, args.json, render)


def _group_reset(args) -> None:
    from . import groups

    to, value = args.to, None
    for name in ("to_datetime", "to_offset", "shift_by"):
        if getattr(args, name) is not None:
            to, value = name.replace("to_", "").replace("_", "-"), getattr(args, name)
    with _admin(args) as admin:
        rows = groups.reset_offsets(admin, args.group, args.topic, to=to, value=value, dry_run=not args.execute,
                                    share=args.share)
    emit(rows, args.json, table)
    if not args.execute:  # on stderr, so --json stays JSON
        print("(plan only: nothing committed; add --execute to commit these offsets)", file=sys.stderr)


def _group_delete(args) -> None:
    from . import groups

    with _admin(args) as admin:
        rows = groups.delete_groups(admin, args.groups)
    _emit_all_or_fail(rows, args, "group", "deleted")


def _group_delete_offsets(args) -> None:
    from . import groups

    with _admin(args) as admin:
        emit(groups.delete_offsets(admin, args.group, args.topic), args.json, table)


def _group_history(args) -> None:
    from . import groups

    def render(d: dict) -> None:
        rows = [{
            "time": utc(e["time_ms"]), "kind": e["kind"],
            "generation": (f"{e['old_generation']}->{e['new_generation']}" if e["new_generation"] is not None
                           else None),
            "reason": e["reason"] + (f" (client: {e['client_reason']})" if e.get("client_reason") else ""),
            "trigger": e["trigger_member"], "in": len(e["members_in"]) if e["kind"] == "rebalance" else None,
            "out": len(e["members_out"]) if e["kind"] == "rebalance" else None,
            # the members whose target moved: an epoch of a consumer, streams or share group (not classic)
            "moved": len(e.get("members_moved", ())) if e["kind"] == "rebalance" and e["group_type"] != "classic"
            else None,
            "members": e["member_count"], "duration_ms": e["duration_ms"],
        } for e in d["rebalances"]]
        table(rows)
        stuck = d.get("in_progress")
        if stuck:
            print(f"\nIn progress since {utc(stuck['started_ms'])} ({stuck['state']}): {stuck['reason']}; "
                  f"{stuck['why']}; waiting for: {', '.join(stuck['members_waiting']) or '-'}")

    emit(groups.history(_admin_url(args), args.group), args.json, render)


def _group_wait(args) -> None:
    from . import groups

    with _admin(args) as admin:
        result = groups.wait_for_group(admin, args.group, members=args.members, stable=args.stable,
                                       timeout_s=args.timeout, admin_url=_quiet_admin_url(args))
    emit(result, args.json, lambda d: print(f"group {d['group']} is {d['state']} with {d['members']} member(s)"))


def _test_control(args) -> None:
    from . import groups

    from urllib.parse import quote

    path = "/v1/test/" + args.path.format(**{k: quote(str(v), safe="") for k, v in vars(args).items()})
    result = groups.http_json(_admin_url(args), path, method="POST", body=args.body(args), timeout_s=args.timeout,
                              token=_test_controls_token(args))

    def render(d: dict) -> None:
        if d.get("detail"):
            print(d["detail"])
        else:
            table([{k: v for k, v in d.items() if k != "ok"}])

    emit(result, args.json, render)


def _test_controls_token(args) -> str | None:
    """--token, else KBROKER_TEST_CONTROLS_TOKEN (argparse's default), else the file the broker wrote in
    its data directory (readable by the broker's user only)."""
    if args.token:
        return args.token
    try:
        with open(os.path.join(args.data_dir, TOKEN_FILE), encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        return None  # the broker says what it needs (401)


def probe_ready(admin_url: str, timeout: float) -> int:
    """`kbroker probe --ready`: exit 0 only when kbroker's /ready says so."""
    import json
    import urllib.error
    import urllib.request

    url = admin_url.rstrip("/") + "/ready"
    try:
        with urllib.request.urlopen(url if "://" in url else "http://" + url, timeout=timeout) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        body = json.loads(e.read() or b"{}")
        print(f"kbroker probe: not ready: {'; '.join(body.get('waiting_for', [])) or e.reason}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError, ValueError) as e:
        print(f"kbroker probe: {admin_url} did not answer: {getattr(e, 'reason', e)}", file=sys.stderr)
        return 1
    print(f"ready: {admin_url}" if body.get("ready") else "not ready")
    return 0 if body.get("ready") else 1
