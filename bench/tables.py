"""The markdown tables of a run's summary and their cells (numbers, percentages, dollars, CIs): the
headline, acceptance, sensitivity and versus tables that report.md and the README's headline
(:mod:`bench.headline`) show."""

from __future__ import annotations

from typing import Any

from bench.honest import SLOWER_THRESHOLD_S


def f(x: Any, unit: str = "", digits: int = 2) -> str:
    """A table cell: numbers rounded, None as an em dash."""
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{digits}f}{unit}"
    return f"{x}{unit}"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def usd(x: float | None) -> str:
    return "—" if x is None else f"${x:.4f}"


def ci(c: list[float] | None) -> str:
    return "—" if not c else "[" + ", ".join("∞" if x is None else f"{x:.2f}" for x in c) + "]"


def later_cell(b: dict[str, Any], base: str) -> str:
    v = b.get("vs", {}).get(base)
    return (
        "—"
        if v is None
        else f"{f(v['saved_per_later_turn_s']['mean'])} {ci(v['saved_per_later_turn_s']['ci95'])}"
    )


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
    ]


MIN_CLUSTERS = 10  # below this, the report says the cluster-bootstrap CIs are rough


def acceptance_table(s: dict[str, Any]) -> list[str]:
    """Saving against acceptance, one row per condition of a sweep (the natural condition marked)."""
    legacy = "ci_method" not in s  # made before issue #24: pair-level CIs, no fork costs
    rows = []
    blocks = sorted(
        s["conditions_detail"], key=lambda b: (b["accept_prob"] is not None, b["accept_prob"] or 0)
    )
    for b in blocks:
        name = (
            "natural: the scenarios' own weights"
            if b["accept_prob"] is None
            else f"forced: {100 * b['accept_prob']:.0f}% of suggestions are the next prompt"
        )
        vs = b.get("vs", {}).get("suggest") or {}
        acc = vs.get("saved_per_accepted_turn_s") or {}
        clusters = f(vs.get("clusters")) if legacy else f"{f(vs.get('scenarios'))} / {f(vs.get('clusters'))}"
        cost = [usd(b["arms"]["speculative"]["cost_per_turn_usd"])]
        if not legacy:
            cost.append(pct((b.get("fork_cost") or {}).get("miss_to_hit")))
        rows.append(
            [
                name,
                pct(b["acceptance_rate"]),
                pct(b["suggestion_coverage"]),
                clusters,
                f"{f(acc.get('median'))} {ci(acc.get('ci95'))}",
                later_cell(b, "suggest"),
                later_cell(b, "plain"),
                *cost,
                misses_cell(b),
            ]
        )
    header = [
        "condition",
        "acceptance",
        "coverage",
        "clusters" if legacy else "scenarios / pairs",
        "saved per accepted turn vs suggest, median [CI] (s)",
        "saved per later turn vs suggest, mean [CI] (s)",
        "vs plain [CI] (s)",
        "speculative $/turn",
        *([] if legacy else ["miss fork cost / hit"]),
        "misses (candidate / later turn / unscripted)",
    ]
    return (
        table(header, rows)
        + ([] if legacy else [*_pooled_fork_cost(blocks), CI_NOTE, ""])
        + condition_notes(s)
    )


def _pooled_fork_cost(blocks: list[dict[str, Any]]) -> list[str]:
    """Hits and misses of every condition together: is a thrown-away fork as costly as a used one?"""
    pooled = {}
    for kind in ("hit", "miss", "miss_completed"):
        parts = [
            (b["fork_cost"][kind]["n"], b["fork_cost"][kind]["mean_usd"])
            for b in blocks
            if b.get("fork_cost") and b["fork_cost"][kind]["n"]
        ]
        n = sum(k for k, _ in parts)
        pooled[kind] = (n, sum(k * m for k, m in parts) / n if n else None)
    (nh, h), (nm, m), (nc, c) = pooled["hit"], pooled["miss"], pooled["miss_completed"]
    if not nh or not nm or h is None or m is None:  # means exist where there are forks
        return []
    return [
        f"Fork cost over all conditions: a hit {usd(h)} (n={nh}), a miss {usd(m)} (n={nm}, "
        f"{pct(m / h)} of a hit; billed as the API bills, cut requests included), a miss that had finished "
        f"{usd(c)} (n={nc}).",
        "",
    ]


SENSITIVITY_ROWS = (
    ("think_median_s", "think time median", "s"),
    ("model_name", "model profile", ""),
    ("typing_cps", "typing speed", " chars/s"),
    ("tab_s", "Tab to accept", " s"),
    ("sim", "simulator", ""),
)


def sensitivity_table(s: dict[str, Any]) -> list[str]:
    """One row per condition of a ``--sensitivity`` run: the assumption it changes from the first (base)
    condition, the saving per later turn against suggest and plain, and the cost against plain."""
    blocks = s.get("conditions_detail") or []
    if not blocks:
        return []
    base = blocks[0]
    rows = []
    for b in blocks:
        changed = [
            f"{label} {b.get(k)}{unit}" for k, label, unit in SENSITIVITY_ROWS if b.get(k) != base.get(k)
        ]
        arms = b["arms"]
        plain, spec = (
            arms.get("plain", {}).get("cost_per_turn_usd"),
            arms.get("speculative", {}).get("cost_per_turn_usd"),
        )
        extra = f"{100 * (spec - plain) / plain:+.0f}%" if plain and spec is not None else "—"
        rows.append(
            [
                "base: " + _base_label(b) if b is base else ", ".join(changed) or "(same as base)",
                pct(b["acceptance_rate"]),
                later_cell(b, "suggest"),
                later_cell(b, "plain"),
                f"{usd(spec)} ({extra})",
                pct((b.get("fork_cost") or {}).get("miss_to_hit")),
            ]
        )
    header = [
        "condition (what differs from the base)",
        "acceptance",
        "saved per later turn vs suggest, mean [CI] (s)",
        "vs plain [CI] (s)",
        "speculative $/turn (vs plain)",
        "miss fork cost / hit",
    ]
    return [*table(header, rows), CI_NOTE, "", *condition_notes(s)]


def _base_label(b: dict[str, Any]) -> str:
    return ", ".join(
        f"{label} {b.get(k)}{unit}" for k, label, unit in SENSITIVITY_ROWS if b.get(k) is not None
    )


def headline_table(s: dict[str, Any]) -> list[str]:
    """The table the README shows: per arm latency, wall time and cost, and what speculation bought."""
    arms = [a for a in ("plain", "suggest", "speculative") if a in s["arms"]]

    def row(name: str, get: Any, fmt: Any = f) -> list[str]:
        vals = [get(s["arms"][a]) for a in arms]
        a, b = vals[0], vals[-1]
        delta = "—"
        if isinstance(a, int | float) and isinstance(b, int | float) and a:
            delta = f"{100 * (b - a) / a:+.0f}%"
        return [name, *(fmt(v) for v in vals), delta]

    rows = [
        row(f"turn latency {q} (s)", lambda x, q=q: x["turn_latency_s"][q]) for q in ("p50", "p90", "p99")
    ]
    rows += [
        row("session wall p50 (s)", lambda x: x["session_wall_s"]["p50"]),
        row("cost per turn (USD)", lambda x: x["cost_per_turn_usd"], usd),
        row("turn errors", lambda x: x["errors"]),
    ]
    lines = table(["", *arms, f"Δ {arms[-1]} vs {arms[0]}"], rows)
    lines += versus_table(s)
    ts = s["time_saved_s"]
    lines += table(
        ["speculation", "value"],
        [
            [
                "accepted / acceptance rate / coverage",
                f"{s['accepted']} / {pct(s['acceptance_rate'])} / {pct(s['suggestion_coverage'])}",
            ],
            [
                "submit-to-answer latency saved per accepted turn vs plain, median [95% CI] (s)",
                f"{f(ts['median'])} {ci(ts['ci95'])}",
            ],
            [
                "mean submit-to-answer saving per later turn vs plain [95% CI] (s)",
                f"{f(s['latency_diff_per_turn_s']['mean'])} {ci(s['latency_diff_per_turn_s']['ci95'])}",
            ],
            [
                "efficiency (pooled / median)",
                f"{pct(s['efficiency']['pooled'])} / {pct(s['efficiency']['median'])}",
            ],
            ["fork input read from cache", pct(s["fork_cache_read_share"])],
            ["wasted tokens (ignored speculations)", f(s["wasted_tokens"])],
            [
                "extra cost / cost per second saved",
                f"{usd(s['extra_cost_usd'])} / {usd(s['cost_per_second_saved_usd'])}",
            ],
            *fork_cost_line(s),
            ["leaks into the real tree", f(s["leaks"])],
        ],
    )
    return lines + user_acceptance_line(s) + condition_notes(s)


def versus_table(s: dict[str, Any]) -> list[str]:
    """Paired savings (base − arm, input time included) of speculative against suggest and plain."""
    blocks = [(f"speculative vs {b}", v) for b, v in s.get("vs", {}).items()]
    keys = list(s.get("vs", {}))
    if s.get("suggest_vs_plain"):
        blocks.append(("suggest vs plain (Tab alone)", s["suggest_vs_plain"]))
        keys.append("suggest_vs_plain")
    honest = (s.get("honest") or {}).get("slower") or {}
    if not blocks:
        return []
    if not any("scenarios" in v for _, v in blocks):
        return _legacy_versus_table(blocks)
    rows = []
    for key, (name, v) in zip(keys, blocks, strict=True):
        acc, later, slow = v["saved_per_accepted_turn_s"], v["saved_per_later_turn_s"], v["slower_turns"]
        rows.append(
            [
                name,
                f"{f(v['scenarios'])} / {f(v['clusters'])}",
                f"{f(acc['median'])} {ci(acc['ci95'])} (n={acc['n']})",
                f"{f(later['mean'])} {ci(later['ci95'])} (n={later['n']})",
                ci(later.get("ci95_pairs")),
                slower_cell(honest[key])
                if key in honest
                else f"{slow['n']} ({pct(slow['share'])}), max {f(slow['max_s'])} s",
                pct(v["session_wall_reduction"]),
            ]
        )
    lines = table(
        [
            "paired comparison",
            "scenarios / pairs",
            "saved per accepted turn, median [95% CI] (s)",
            "saved per later turn, mean [95% CI] (s)",
            "same, pair-level CI",
            f"turns slower than base by > {1000 * SLOWER_THRESHOLD_S:.0f} ms; noise floor"
            if honest
            else "turns slower than base",
            "session wall saved",
        ],
        rows,
    )
    lines += [CI_NOTE, ""]
    if honest:
        lines += [SLOWER_NOTE, ""]
    few = min(v["scenarios"] for _, v in blocks)
    if few < MIN_CLUSTERS:  # a cluster bootstrap over a handful of scenarios understates the uncertainty
        lines += [
            f"**These CIs rest on {few} scenarios (fewer than {MIN_CLUSTERS}): read them as rough.** "
            "Run more scenarios for a result.",
            "",
        ]
    return lines


def _legacy_versus_table(blocks: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """A summary made before issue #24: its CIs resample pairs only, and the table says so."""
    rows = []
    for name, v in blocks:
        acc, later, slow = v["saved_per_accepted_turn_s"], v["saved_per_later_turn_s"], v["slower_turns"]
        rows.append(
            [
                name,
                f(v["clusters"]),
                f"{f(acc['median'])} {ci(acc['ci95'])} (n={acc['n']})",
                f"{f(later['mean'])} {ci(later['ci95'])} (n={later['n']})",
                f"{slow['n']} ({pct(slow['share'])}), max {f(slow['max_s'])} s",
                pct(v["session_wall_reduction"]),
            ]
        )
    lines = table(
        [
            "paired comparison",
            "clusters",
            "saved per accepted turn, median [95% CI] (s)",
            "saved per later turn, mean [95% CI] (s)",
            "turns slower than base",
            "session wall saved",
        ],
        rows,
    )
    few = min(v["clusters"] for _, v in blocks)
    if few < MIN_CLUSTERS:
        lines[-1:-1] = [
            f"**These CIs rest on {few} session clusters (fewer than {MIN_CLUSTERS}): read them as "
            "rough.** Run more reps or scenarios for a result.",
            "",
        ]
    return lines


CI_NOTE = (
    "CIs: 95% percentile bootstrap resampling scenarios, then reps within each (the hierarchical CI); "
    "the pair-level CI resamples reps only and treats the reps of a scenario as independent, which "
    "they are not (it is narrower, shown for comparison with runs before issue #24)."
)


def fork_cost_line(s: dict[str, Any]) -> list[list[str]]:
    """Mean cost of a fork that was used (hit) and of one thrown away (miss): misses must not be cheap."""
    fc = s.get("fork_cost")
    if not fc:
        return []
    h, m, mc = fc["hit"], fc["miss"], fc["miss_completed"]
    return [
        [
            "fork cost per hit / per miss (ratio); misses that had finished",
            f"{usd(h['mean_usd'])} (n={h['n']}) / {usd(m['mean_usd'])} (n={m['n']}) ({pct(fc['miss_to_hit'])}); "
            f"{usd(mc['mean_usd'])} (n={mc['n']})",
        ]
    ]


def misses_cell(b: dict[str, Any]) -> str:
    m = b.get("miss_kinds") or {}
    return "—" if not m else " / ".join(str(m.get(k, 0)) for k in ("candidate", "later_turn", "unscripted"))


SLOWER_NOTE = (
    f"Slower turns: later turns slower than their paired base turn by more than {1000 * SLOWER_THRESHOLD_S:.0f} ms "
    "(how many were slower by less is in summary.json, `honest.slower`); the noise floor is the 95th "
    "percentile of the paired difference on turns where the arm typed its prompt and ran no fork (both arms "
    "did the same work), with how many such turns there were."
)


def slower_cell(h: dict[str, Any]) -> str:
    """Slower turns above the threshold, the largest, and the noise floor they are read against."""
    nf = h["noise_floor"]
    return f"{h['n']} ({pct(h['share'])}), max {f(h['max_s'])} s; floor {f(nf['p95_abs_s'])} s (n={nf['n']})"


def user_acceptance_line(s: dict[str, Any]) -> list[str]:
    """Acceptance as the user's choice, the policy's abstentions and the forks that landed beside it."""
    h = s.get("honest") or {}
    a, sg = h.get("acceptance"), h.get("suggestions")
    if not a or not sg:
        return []
    dead = sg["not_shown"]
    unknown = s.get("acceptance_unknown") or []
    caveat = (
        [
            f"**Acceptance unknown** for {len(unknown)} of {len(s.get('scenarios') or unknown)} scenarios "
            f"({', '.join(unknown)}): imported without promptSource, so whether a prompt was a taken suggestion "
            "is not known; the acceptance figures below are not a measurement of them.",
            "",
        ]
        if unknown
        else []
    )
    return [
        *caveat,
        f"The user sent {a['sent_by_user']} of {a['shown']} suggestions shown ({pct(a['user_acceptance'])}); "
        f"the policy abstained on {a['abstained']} of them ({a['abstained_then_sent']} sent anyway, run live); "
        f"{a['fork_landed']} forks landed. One record per suggestion shown: besides them the engine wrote "
        f"{dead['discarded_with_fork']} record(s) of a fork's pipelined next suggestion thrown away with it "
        f"({usd(dead['discarded_with_fork_cost_usd'])}, counted as that fork's waste) and "
        f"{dead['suppressed_or_filtered']} of suggestions suppressed or filtered (never shown).",
        "",
    ]


def condition_notes(s: dict[str, Any]) -> list[str]:
    """A line per condition that never showed what it varies (top-K with no second candidate, ...)."""
    notes = [
        f"**{b['label']}: {c['note']}**, so it measures nothing of what it varies."
        for b in s.get("conditions_detail") or []
        if (c := (b.get("honest") or {}).get("condition")) and c.get("note")
    ]
    return [*notes, ""] if notes else []
