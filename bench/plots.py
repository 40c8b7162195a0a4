"""PNG figures of a run (matplotlib, Agg backend: no display needed). What each shows: docs/experiments.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use("Agg"): the backend must be chosen first

from bench.pairs import Records, paired_turns, user_saving
from bench.records import SessionRecord, TurnRecord

COLORS = {"plain": "#4c72b0", "suggest": "#8172b3", "speculative": "#dd8452"}
PLOTS = ("latency_cdf.png", "time_saved_vs_think.png", "cost_vs_latency.png")


def _finish(
    fig: Any, ax: Any, path: Path, xlabel: str, ylabel: str, title: str, legend: dict[str, Any] | None = None
) -> None:
    """Labels, grid, legend, save, close: the same for every figure."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(**(legend or {"fontsize": 8}))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_cdf(turns: list[TurnRecord], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for arm, color in COLORS.items():
        xs = sorted(t.latency_s for t in turns if t.arm == arm)
        if xs:
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step(xs, ys, where="post", color=color, label=f"{arm} (n={len(xs)})")
    ax.set_ylim(0, 1.02)
    _finish(
        fig,
        ax,
        path,
        "turn latency, submit to final answer (s)",
        "fraction of turns",
        "User-perceived turn latency (CDF)",
        legend={"loc": "lower right"},
    )


def time_saved_vs_think(
    turns: list[TurnRecord],
    curve: list[dict[str, float]],
    path: Path,
    *,
    time_scale: float = 1.0,
    condition: str = "",
) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    acc_x: list[float] = []
    acc_y: list[float] = []
    oth_x: list[float] = []
    oth_y: list[float] = []
    # Against suggest when it ran: Tab is on both sides, so the points show what the fork bought.
    base = "suggest" if any(t.arm == "suggest" for t in turns) else "plain"
    for p, s in paired_turns(turns, base):
        if s.turn == 0:
            continue
        # x: think time, as the sweep curve's x (both wall seconds at the run's time scale); y: includes input
        (acc_x if s.accepted else oth_x).append(s.think_s)
        (acc_y if s.accepted else oth_y).append(user_saving(p, s))
    ax.scatter(oth_x, oth_y, s=14, color="#999999", alpha=0.6, label="not accepted")
    ax.scatter(acc_x, acc_y, s=18, color=COLORS["speculative"], alpha=0.8, label="accepted")
    xs = acc_x + oth_x + [c["think_s"] for c in curve]
    if xs:
        top = max(xs)
        ax.plot([0, top], [0, top], ls="--", color="#333333", lw=0.8, label="saving = think time")
    if curve:
        ax.plot(
            [c["think_s"] for c in curve],
            [c["mean_saving_per_turn_s"] for c in curve],
            marker="o",
            color="#55a868",
            label="sweep: mean saving per turn",
        )
    ax.axhline(0, color="black", lw=0.6)
    _finish(
        fig,
        ax,
        path,
        f"think time (wall s at time scale {time_scale:g})",
        f"paired saving, {base} − speculative (s)",
        f"Time saved vs think time ({condition})" if condition else "Time saved vs think time",
    )


def cost_vs_latency(turns: list[TurnRecord], sessions: list[SessionRecord], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    lat: dict[str, list[float]] = {}
    for t in turns:
        lat.setdefault(t.session, []).append(t.latency_s)
    for arm, color in COLORS.items():
        pts = [
            (sum(lat[s.session]) / len(lat[s.session]), s.cost_usd / max(1, s.turns))
            for s in sessions
            if s.arm == arm and lat.get(s.session)
        ]
        if pts:
            ax.scatter(
                [p[0] for p in pts],
                [p[1] for p in pts],
                s=18,
                alpha=0.6,
                color=color,
                label=f"{arm} sessions",
            )
            mx, my = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
            ax.scatter([mx], [my], s=120, marker="X", color=color, edgecolor="black", label=f"{arm} mean")
    _finish(
        fig,
        ax,
        path,
        "mean turn latency in the session (s)",
        "cost per turn (USD)",
        "Cost vs latency (one point per session)",
    )


def saving_vs_acceptance(summary: dict[str, Any], path: Path) -> bool:
    """Mean saving per later turn (vs suggest and vs plain, 95% CI) against the measured acceptance rate of
    each condition; the natural condition (the scenarios' own rate) is marked. False if nothing to plot."""
    pts = [
        (b["acceptance_rate"], b)
        for b in summary.get("conditions_detail", [])
        if b.get("acceptance_rate") is not None
    ]
    if len(pts) < 2:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for base, color in (("suggest", COLORS["suggest"]), ("plain", COLORS["plain"])):
        xs, ys, lo, hi = [], [], [], []
        for x, b in sorted(pts, key=lambda p: p[0]):
            v = b.get("vs", {}).get(base)
            if v is None or v["saved_per_later_turn_s"]["mean"] is None:
                continue
            m, c = v["saved_per_later_turn_s"]["mean"], v["saved_per_later_turn_s"]["ci95"] or [None, None]
            xs.append(100 * x)
            ys.append(m)
            lo.append(m - c[0] if c[0] is not None else 0.0)
            hi.append(c[1] - m if c[1] is not None else 0.0)
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, color=color, label=f"vs {base}")
    natural = [100 * x for x, b in pts if b.get("accept_prob") is None]
    for x in natural:
        ax.axvline(x, ls=":", color="#333333", lw=0.9)
    if natural:
        ax.plot([], [], ls=":", color="#333333", label="bundled scenarios' own rate")
    ax.axhline(0, color="black", lw=0.6)
    _finish(
        fig,
        ax,
        path,
        "acceptance rate of shown suggestions (%)",
        "mean saving per later turn (s)",
        f"Saving vs acceptance\n{_sweep_condition(pts)}; time scale {float(summary.get('time_scale', 1.0)):g}",
    )
    return True


def _sweep_condition(pts: list[tuple[float, dict[str, Any]]]) -> str:
    """What the acceptance conditions share (think-time model, latency profile), for the title."""
    thinks = sorted({str(b.get("think_model", "?")) for _, b in pts})
    models = sorted({str(b.get("model_name", "?")) for _, b in pts})
    return f"think {', '.join(thinks)}, {', '.join(models)}"


def write_plots(out: Path, records: Records, summary: dict[str, Any]) -> list[Path]:
    """The three figures for the primary condition (plus the sweep curve); returns the paths written."""
    first = min((s.cond for s in records.sessions), default=0)
    primary = records.only(s for s in records.sessions if s.cond == first)
    paths = [out / name for name in PLOTS]
    latency_cdf(primary.turns, paths[0])
    time_saved_vs_think(
        primary.turns,
        summary.get("break_even_think_s", {}).get("curve", []),
        paths[1],
        time_scale=float(summary.get("time_scale", 1.0)),
        condition=str(summary.get("primary_condition") or ""),
    )
    cost_vs_latency(primary.turns, primary.sessions, paths[2])
    if saving_vs_acceptance(summary, out / "saving_vs_acceptance.png"):
        paths.append(out / "saving_vs_acceptance.png")
    return paths
