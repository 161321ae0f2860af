"""The ``appliance`` command: serve, ingest, bench, doctor, users (backup and restore in
``ops.py``, cluster in ``cluster.py``)."""

from __future__ import annotations

import argparse
import getpass
import importlib
import logging
import sys
from pathlib import Path

from appliance.cli.cluster import register as register_cluster
from appliance.cli.ops import register as register_ops
from appliance.cli.serving import serve
from appliance.core.config import AppConfig, ConfigError, load_config


def _config(args: argparse.Namespace) -> AppConfig:
    overrides: dict = {}
    if getattr(args, "host", None):
        overrides.setdefault("server", {})["host"] = args.host
    if getattr(args, "port", None) is not None:
        overrides.setdefault("server", {})["port"] = args.port
    return load_config(args.config, overrides=overrides)


def cmd_serve(args: argparse.Namespace) -> int:
    return serve(_config(args))


def cmd_ingest(args: argparse.Namespace) -> int:
    from appliance.wiring.appliance import build_appliance, reindex_knowledge

    config = _config(args)
    config = config.model_copy(
        update={"bootstrap": config.bootstrap.model_copy(update={"ingest_sample_corpus": False})}
    )
    from tqdm import tqdm

    from appliance.core.services.ingest import IngestResult, files_in

    if not args.paths and not args.reindex:
        print("appliance ingest: give files or folders, or --reindex", file=sys.stderr)
        return 2
    if args.reindex:
        bar = _ReindexBar(tqdm)
        count = reindex_knowledge(config, progress=bar)
        bar.close()
        print(f"reindexed {count} chunks", flush=True)
        if not args.paths:
            return 0
    appliance = build_appliance(config)
    try:
        # a folder's files are named by their path below it; a file given alone by its name
        groups = [
            (files_in(path), path) if path.is_dir() else ([path], None)
            for path in map(Path, args.paths)
        ]
        bar = tqdm(
            total=sum(len(f) for f, _ in groups), unit="file", desc="ingest", file=sys.stderr
        )

        def report(r: IngestResult) -> None:
            line = f"{r.status:9} {r.name}"
            line += f": {r.chunks} chunks" if r.chunks else ""
            line += f": {r.error}" if r.error else ""
            tqdm.write(line, file=sys.stdout)
            bar.update(1)

        results = [
            result
            for files, root in groups
            for result in appliance.ingest.ingest_paths(
                files, collection=args.collection, actor="cli", progress=report, root=root
            )
        ]
        bar.close()
        return 1 if any(r.status == "error" for r in results) else 0
    finally:
        appliance.close()


class _ReindexBar:
    """A progress callback for ``KnowledgeBase.reindex`` that draws a tqdm bar on stderr."""

    def __init__(self, tqdm) -> None:  # noqa: ANN001 - the tqdm class
        self.bar = tqdm(total=0, unit="chunk", desc="reindex", file=sys.stderr)

    def __call__(self, done: int, total: int) -> None:
        self.bar.total = total
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def cmd_users(args: argparse.Namespace) -> int:
    from appliance.core.auth.service import AuthError, AuthService
    from appliance.wiring.appliance import open_database

    config = _config(args)
    db = open_database(config)
    auth = AuthService(db, config.security.session_ttl_hours)
    try:
        if args.action == "list":
            for p in auth.list_users():
                reach = "all" if p.is_admin else ",".join(sorted(p.collections))
                print(f"{p.username}\t{p.role}\t{reach}")
            return 0
        if args.action == "grant":
            who = auth.set_collections(args.username, (args.collections or "").split(","))
            print(f"{who.username} may retrieve from: {', '.join(sorted(who.collections))}")
            return 0
        password = args.password or getpass.getpass(f"password for {args.username}: ")
        if args.action == "create":
            auth.create_user(args.username, password, role=args.role)
            print(f"created {args.role} {args.username}")
        else:
            auth.set_password(args.username, password)
            print(f"password changed for {args.username}")
        return 0
    except AuthError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        db.dispose()


def cmd_doctor(args: argparse.Namespace) -> int:
    from appliance.ops.doctor import run_checks

    return run_checks(_config(args))


def cmd_engine_server(args: argparse.Namespace) -> int:
    import uvicorn

    from appliance.wiring.appliance import build_engine
    from engine.server.app import build_server_app

    config = load_config(args.config)
    print(f"loading the engine (profile {config.profile})", flush=True)
    engine = build_engine(config)
    name = args.served_model_name or engine.info().model
    app = build_server_app(engine, name)
    url = f"http://{args.host}:{args.port}"
    print(f"SGLang-compatible engine server for {name} on {url}", flush=True)
    try:
        # no client address is read from X-Forwarded-* here either
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", proxy_headers=False)
    finally:
        engine.close()
    return 0


# Benchmark suites: suite name -> (module, help). The module exposes
# ``main(argv, config) -> int`` and parses its own options from ``argv`` (so its heavy imports
# happen only when that suite runs).
BENCH_SUITES: dict[str, tuple[str, str]] = {
    "engine": ("appliance.bench.engine_bench", "TTFT, batching and memory of the CPU engine"),
    "index": ("appliance.bench.index_bench", "retrieval latency, recall and ingest speed"),
    "chunks": (
        "appliance.bench.chunk_bench",
        "what ingestion indexes from real HTML, before/after",
    ),
    "ordering": (
        "appliance.bench.ordering.bench",
        "context ordering: prefill, hit ratio, TTFT and quality vs ContextPilot",
    ),
    "load": ("appliance.bench.load_bench", "simulated staff sessions against a running app"),
    "probes": (
        "appliance.bench.probes.bench",
        "hostile and malformed requests against a running app, with what each must get",
    ),
    "quality": (
        "appliance.bench.quality_bench",
        "grounded answers: facts shown first, loops, unflagged inventions, per mode",
    ),
    "support": ("appliance.bench.support_bench", "precision/recall of 'supported' on labels"),
    "followups": (
        "appliance.bench.followup_bench",
        "what follow-ups retrieve: leaning on the last question, or a new topic",
    ),
    "embedders": (
        "appliance.bench.embedder_bench",
        "multilingual embedders vs today's: recall@4/@10 dense and hybrid, speed, memory",
    ),
}


def cmd_bench(args: argparse.Namespace) -> int:
    module = importlib.import_module(BENCH_SUITES[args.suite][0])
    return module.main(list(args.options), _config(args))


def cmd_gateway(args: argparse.Namespace) -> int:
    from urllib.parse import urlsplit

    from engine.sglang.gateway import gateway_for
    from engine.sglang.units import gateway_spec, render_unit

    config = _config(args)
    if not config.engine.sglang_worker_urls:
        print("engine.sglang_worker_urls is empty: list the SGLang workers first", file=sys.stderr)
        return 2
    front = urlsplit(config.engine.sglang_url)
    gateway = gateway_for(
        config.engine.sglang_worker_urls, host=front.hostname or "127.0.0.1", port=front.port or 80
    )
    if args.what == "command":
        print(gateway.command())
    else:
        spec = gateway_spec(gateway, user="sglang", working_directory="/opt/rag-appliance")
        print(render_unit(spec))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="appliance", description="On-prem RAG chat appliance")
    parser.add_argument("--config", type=Path, default=None, help="TOML config file")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run the web app (chat, API) and the engine")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("ingest", help="add documents (files or folders) to the index")
    p.add_argument("paths", nargs="*")
    p.add_argument("--collection", default="default")
    p.add_argument(
        "--reindex",
        action="store_true",
        help="recompute every chunk's vectors and evidence sentences with the configured embedder "
        "(after switching embedders), then ingest any paths",
    )
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser(
        "engine-server", help="serve the embedded engine over SGLang's HTTP API (and /v1)"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--served-model-name", help="default: the model directory's name")
    p.set_defaults(func=cmd_engine_server)

    p = sub.add_parser("bench", help="benchmarks that print tables")
    suites = p.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for name, (_module, help_text) in BENCH_SUITES.items():
        # the suite parses its own options (``appliance bench SUITE --help`` shows them)
        q = suites.add_parser(name, help=help_text, add_help=False)
        q.set_defaults(func=cmd_bench)

    p = sub.add_parser("doctor", help="check the installation and say what to fix")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser(
        "gateway", help="render the SGLang model gateway (multi-node) command or systemd unit"
    )
    p.add_argument("what", choices=["command", "unit"])
    p.set_defaults(func=cmd_gateway)

    p = sub.add_parser("users", help="manage accounts")
    p.add_argument("action", choices=["list", "create", "passwd", "grant"])
    p.add_argument("username", nargs="?")
    p.add_argument("--role", choices=["staff", "admin"], default="staff")
    p.add_argument("--password", help="default: prompt for it")
    p.add_argument("--collections", help="with grant: comma-separated collection names")
    p.set_defaults(func=cmd_users)

    register_ops(sub)  # backup and restore (``appliance.cli.ops``)
    register_cluster(sub)  # cluster up and down (``appliance.cli.cluster``)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "bench":
        args.options = extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "users" and args.action != "list" and not args.username:
        parser.error("users create/passwd need a username")
    try:
        return args.func(args)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
