"""Capacity planner tab: GPU, model and target context in; max concurrent sessions and the
tuned SGLang launch out (``engine.sglang.tuning`` via the planner service)."""

from __future__ import annotations

import gradio as gr

from appliance.core.auth.service import AuthService
from appliance.core.services.admin.planner import (
    MODEL_PRESETS,
    CapacityPlan,
    PlanError,
    gpu_choices,
    plan_capacity,
)
from engine.sglang.gpu_info import read_gpus
from ui.session import require_admin


def plan_markdown(plan: CapacityPlan) -> str:
    lines = [
        f"### {plan.max_sessions} concurrent sessions at {plan.context_length:,} tokens each",
        f"{plan.model} on {plan.gpu}: {plan.workers} worker(s) of tp {plan.tp}"
        f"{' behind the gateway' if plan.workers > 1 else ''}, `--mem-fraction-static "
        f"{plan.mem_fraction_static:g}`, weights {plan.weights_gib} GiB, KV pool "
        f"{plan.kv_capacity_tokens:,} tokens, {plan.max_running_requests} running requests "
        "in all",
        "",
        "| context | sessions |",
        "|---:|---:|",
    ]
    lines += [f"| {ctx:,} | {n:,} |" for ctx, n in plan.capacity_table]
    lines += [f"\n⚠️ {w}" for w in plan.warnings]
    return "\n".join(lines)


def build_planner_tab(auth: AuthService) -> None:
    choices = gpu_choices(has_local=bool(read_gpus()))

    def run(
        gpu: str,
        count: float,
        model: str,
        model_dir: str,
        context: float,
        concurrency: float,
        request: gr.Request,
    ) -> tuple[str, str]:
        require_admin(request, auth)
        try:
            plan = plan_capacity(
                gpu, int(count or 1), model, int(context or 0), model_dir, int(concurrency or 1)
            )
        except PlanError as exc:
            raise gr.Error(str(exc)) from exc
        return plan_markdown(plan), plan.command

    with gr.Tab("Planner", id="planner"):
        with gr.Row():
            gpu = gr.Dropdown(choices, value=choices[0], label="GPU", elem_id="plan-gpu")
            count = gr.Number(1, label="GPUs", precision=0, minimum=1, maximum=16)
            model = gr.Dropdown(list(MODEL_PRESETS), value=next(iter(MODEL_PRESETS)), label="Model")
            model_dir = gr.Textbox(label="…or a model directory (config.json)")
        with gr.Row():
            context = gr.Number(32768, label="Target context length", precision=0)
            concurrency = gr.Number(32, label="Expected concurrent users", precision=0)
            plan_btn = gr.Button("Plan", variant="primary", elem_id="plan")
        result = gr.Markdown(elem_id="plan-result")
        command = gr.Code(label="Tuned launch", language="shell", elem_id="plan-command")
    plan_btn.click(run, [gpu, count, model, model_dir, context, concurrency], [result, command])
