"""``appliance cluster up`` and ``appliance cluster down``: N embedded-engine workers behind the
SGLang model gateway on this box (or the gateway alone in front of remote workers), and the
app served against the gateway."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

from appliance.core.config import AppConfig, load_config

if TYPE_CHECKING:
    from appliance.wiring.cluster_plan import ClusterPlan


def cmd_cluster(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.action == "down":
        return _down(config)
    return _up(args, config)


def _down(config: AppConfig) -> int:
    from appliance.wiring.cluster import stop_recorded

    stopped = stop_recorded(config.paths.data_dir)
    print(f"stopped: {', '.join(stopped)}" if stopped else "no cluster was running")
    return 0


def _up(args: argparse.Namespace, config: AppConfig) -> int:
    from appliance.wiring.cluster import ClusterError, LocalCluster, running_state
    from appliance.wiring.cluster_plan import plan_cluster
    from engine.embedded.model_store import resolve_model_dir
    from engine.embedded.omp import run_in_own_thread

    data_dir = config.paths.data_dir
    if running_state(data_dir):
        print("a cluster is already running here: `appliance cluster down` first", file=sys.stderr)
        return 2
    data_dir.mkdir(parents=True, exist_ok=True)
    e = config.engine
    model_dir = run_in_own_thread(lambda: resolve_model_dir(e.model_path, config.paths.models_dir))
    try:
        plan = plan_cluster(
            workers=args.workers,
            model_dir=model_dir,
            served_model_name=model_dir.name,
            cpus=args.threads or os.cpu_count() or 1,
            base_port=args.base_port,
            gateway_port=args.gateway_port,
            config_path=args.config,
            policy=args.policy,
            remote=tuple(u.rstrip("/") for u in args.worker_url or ()),
        )
    except ValueError as exc:  # no worker, a bad worker URL, ports that collide
        print(f"cluster up: {exc}", file=sys.stderr)
        return 2
    cluster = LocalCluster(plan, data_dir)
    # SIGTERM (``appliance cluster down``, systemd) ends the foreground like Ctrl-C, so that
    # the workers and the gateway are stopped with it
    signal.signal(signal.SIGTERM, _interrupt)
    stop = threading.Event()
    try:
        print(f"starting {len(plan.workers)} worker(s) and the gateway", flush=True)
        cluster.start(timeout_s=args.timeout)
        print(f"gateway ready on {cluster.gateway_url} ({plan.gateway.policy})", flush=True)
        for url in plan.worker_urls:
            print(f"  worker {url}", flush=True)
        if args.no_serve:
            cluster.watch(stop)
            return 1  # the gateway died
        threading.Thread(target=cluster.watch, args=(stop,), daemon=True).start()
        return _serve(config, plan, str(model_dir))
    except ClusterError as exc:
        print(f"cluster up failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stop.set()
        cluster.stop()
        print("cluster stopped", flush=True)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def _serve(config: AppConfig, plan: ClusterPlan, model_dir: str) -> int:
    from appliance.cli.serving import serve

    engine = config.engine.model_copy(
        update={
            "backend": "sglang",
            "sglang_url": plan.gateway.base_url,
            "sglang_worker_urls": plan.worker_urls,
            "gateway_metrics_url": plan.gateway.metrics_url,
            "model_path": model_dir,  # the client's tokenizer
        }
    )
    return serve(config.model_copy(update={"engine": engine}))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cluster",
        help="workers behind the SGLang model gateway on this box, and the app served on it",
    )
    p.add_argument("action", choices=["up", "down"])
    p.add_argument("--workers", type=int, default=2, help="local engine-server workers (up)")
    p.add_argument(
        "--worker-url",
        action="append",
        help="a remote worker instead of local ones (repeat; the multi-node profile)",
    )
    p.add_argument("--threads", type=int, default=0, help="CPU threads to split (default: all)")
    p.add_argument("--base-port", type=int, default=30001, help="the first worker's port")
    p.add_argument("--gateway-port", type=int, default=30000, help="the gateway's port")
    p.add_argument("--policy", default="cache_aware", choices=["cache_aware", "round_robin"])
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to become ready")
    p.add_argument(
        "--no-serve", action="store_true", help="run the workers and gateway only, not the app"
    )
    p.set_defaults(func=cmd_cluster)
