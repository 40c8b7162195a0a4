"""Cost-aware abstention: whether a suggestion is worth a fork, in dollars against seconds.

Before forking, the engine asks :class:`SpecPolicy` for each candidate suggestion:

- **P(accept)**, a Beta-Binomial posterior predictive keyed on what the engine can see (:class:`Features`:
  the candidate's rank, the previous suggestion's outcome, the last turn's tools, the context size, the
  suggestion's first word and length). Sessions are short, so the specific keys are sparse: the estimate
  backs off from coarse to fine keys with partial pooling (:class:`BetaBackoff`). The coarsest key (the rank)
  has the configured prior Beta(a, b) plus its counts; each finer key has Beta(m·p, m·(1-p)) plus its own
  counts, where p is the posterior mean one level up and m the pooling strength. A key never seen gives
  its parent's mean; a key seen often is dominated by its own counts.
- **the expected saving S** (seconds): what a right fork saved in this session, as a shrunk mean
  (:class:`MeanEstimate`, prior 3 s of weight 1) over every finished turn: a used fork's measured saving,
  otherwise min(turn latency, time from the suggestion to the user's decision), which is what a right
  fork would have saved (it runs while the user decides, and saves at most the turn's latency).
- **the expected cost C** (dollars) of the fork: its requests read the shared prefix at the cache-read
  rate (the full input rate when the prefix is below the model's minimum cacheable length), write what each
  adds at the 5-minute cache-write rate and pay output at the output rate (:class:`ForkCost`: requests,
  written and output tokens per request are shrunk means over this session's finished forks).

- **P(lands | accept)** (issue #36): a taken suggestion saves nothing when its fork cannot land (it stops at
  a protected path such as ``.git/`` for a commit, conflicts, or is declined). A second Beta backoff over
  the suggestion's *predicted boundary* (:func:`boundary_of`: a commit, push or pull request, a ``.git/``
  or ``.claude/`` write found by the shell parser in a command the suggestion spells out; else ``none``), then
  its first word, then its length, learns from earlier forks that were taken whether their work landed. Its
  prior is Beta(4, 1) (most taken forks land) for ``none`` and Beta(1, 4) for a protected boundary; a
  history replaces both with counts. P(lands) = P(accept) · P(lands | accept).

It forks when ``value · P · S > (1 - P) · C`` with P = P(lands): ``value`` (λ, dollars per second saved) is
the one dial; (1 - P) · C is the failure-weighted cost, since a used fork's tokens replace the turn's own.
``value`` None (the default) always forks, as before this module, and still records the numbers.

Each shown candidate updates the posterior with whether the user sent it, forked or not (ghost text is
shown when the engine abstains, so there is no selection bias). With ``persist`` the counts and estimates
are kept per project in the state dir (:func:`policy_path`), so a new session starts from the project's
history.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speculate.speculation.estimates import PRIOR_SAVING_S, ForkCost, MeanEstimate
from speculate.speculation.events import Decision
from speculate.speculation.landing import LandBackoff, boundary_of
from speculate.types import Message, is_prompt, tool_uses

if TYPE_CHECKING:
    from speculate.session_types import SessionConfig, SpecEdits
    from speculate.speculation.host import Host

DEFAULT_PRIOR = (1.0, 1.0)  # Beta(a, b) of P(accept) before any outcome: mean 0.5
DEFAULT_POOLING = 2.0  # m: pseudo-counts a finer key borrows from its parent's mean


def length_bucket(text: str) -> str:
    n = len(text.split())
    return "1" if n <= 1 else "2-4" if n <= 4 else "5-8" if n <= 8 else "9+"


def context_bucket(tokens: int) -> str:
    return (
        "<8k"
        if tokens < 8_000
        else "8-32k"
        if tokens < 32_000
        else "32-128k"
        if tokens < 128_000
        else "128k+"
    )


def last_turn_tools(messages: Sequence[Message]) -> str:
    """The tools the last turn called (sorted, '+'-joined), or 'none'."""
    names: set[str] = set()
    for m in reversed(messages):
        if m["role"] == "user" and is_prompt(m):
            break
        if m["role"] == "assistant":
            names.update(str(b.get("name")) for b in tool_uses(m))
    return "+".join(sorted(names)) or "none"


@dataclass(frozen=True, kw_only=True)
class Features:
    """What the engine knows about a candidate before forking it."""

    rank: int  # 0: the first candidate (the ghost text)
    prev: str  # the previous suggestion's outcome: accepted | ignored | none
    tools: str  # the last turn's tools
    context: str  # bucket of the conversation's size in tokens
    first_word: str
    length: str  # bucket of its word count
    boundary: str = "none"  # the predicted boundary (boundary_of)

    def keys(self) -> list[str]:
        """Coarse to fine: each key adds features to the one before."""
        base = f"rank={self.rank}"
        k1 = f"{base}|prev={self.prev}"
        k2 = f"{k1}|tools={self.tools}|ctx={self.context}"
        return [base, k1, k2, f"{k2}|first={self.first_word}|len={self.length}"]

    def land_keys(self) -> list[str]:
        """P(lands | accept), coarse to fine: the predicted boundary, then the first word, then the length."""
        base = f"boundary={self.boundary}"
        k1 = f"{base}|first={self.first_word}"
        return [base, k1, f"{k1}|len={self.length}"]

    def as_dict(self) -> dict[str, str]:
        return {
            "rank": str(self.rank),
            "prev": self.prev,
            "tools": self.tools,
            "context": self.context,
            "first_word": self.first_word,
            "length": self.length,
            "boundary": self.boundary,
        }


def features_of(
    text: str, *, rank: int, prev: str, messages: Sequence[Message], context_tokens: int
) -> Features:
    words = text.split()
    return Features(
        rank=rank,
        prev=prev,
        tools=last_turn_tools(messages),
        context=context_bucket(context_tokens),
        first_word=words[0].lower().strip(",.!?:;") if words else "",
        length=length_bucket(text),
        boundary=boundary_of(text),
    )


@dataclass
class BetaBackoff:
    """Beta-Binomial counts per key with partial pooling from coarse to fine keys (module docstring)."""

    prior: tuple[float, float] = DEFAULT_PRIOR
    pooling: float = DEFAULT_POOLING
    counts: dict[str, list[int]] = field(default_factory=dict)  # key -> [accepted, not accepted]

    def __post_init__(self) -> None:
        a, b = self.prior
        if not (a > 0 and b > 0 and math.isfinite(a + b)):
            raise ValueError(f"policy prior {self.prior}: both Beta parameters must be positive numbers")
        if not self.pooling >= 0:
            raise ValueError(f"policy pooling {self.pooling}: must be >= 0")

    def p_accept(self, keys: Sequence[str]) -> float:
        """The posterior predictive P(accept) at the finest key."""
        a, b = self.prior
        s, f = self.counts.get(keys[0], (0, 0))
        p = (a + s) / (a + b + s + f)
        for key in keys[1:]:
            s, f = self.counts.get(key, (0, 0))
            p = (self.pooling * p + s) / (self.pooling + s + f) if self.pooling + s + f > 0 else p
        return p

    def observe(self, keys: Sequence[str], accepted: bool) -> None:
        for key in keys:
            c = self.counts.setdefault(key, [0, 0])
            c[0 if accepted else 1] += 1


def should_fork(*, p: float, saving_s: float, cost_usd: float, value: float | None) -> bool:
    """The rule: value · P · S > (1 - P) · C; always with no value (λ unset)."""
    if value is None or math.isinf(value):
        return True
    return value * p * saving_s > (1.0 - p) * cost_usd


@dataclass(kw_only=True)
class SpecPolicy:
    """One session's estimator and decision rule (module docstring)."""

    value: float | None = None  # λ, dollars per second saved; None: always fork
    model_name: str = "claude-sonnet-4-6"
    beta: BetaBackoff = field(default_factory=BetaBackoff)
    land: LandBackoff = field(default_factory=LandBackoff)
    use_land: bool = True  # False: P(accept) alone, as before issue #36 (bench/policy_cv.py compares them)
    saving: MeanEstimate = field(default_factory=lambda: MeanEstimate(PRIOR_SAVING_S))
    cost: ForkCost = field(default_factory=ForkCost)
    prev: str = "none"  # the last suggestion's outcome (a feature of the next)
    decision_s: float | None = None  # the last suggestion's time to decision, for the next turn's saving
    _outcome: str | None = None  # this cycle's suggestion outcome, the next cycle's ``prev``
    _landing: list[str] | None = None  # the taken, forked candidate's land keys, until its turn ends

    def new_cycle(self) -> None:
        """A turn ended: the suggestion before it (if any was shown) is the next one's previous outcome."""
        self.prev, self._outcome = self._outcome or "none", None

    def decide(
        self, candidates: Sequence[str], *, messages: Sequence[Message], context_tokens: int
    ) -> list[Decision]:
        out = []
        s = self.saving.value
        c = self.cost.estimate(self.model_name, context_tokens)
        for rank, text in enumerate(candidates):
            f = features_of(text, rank=rank, prev=self.prev, messages=messages, context_tokens=context_tokens)
            out.append(self.decision(f, text, saving_s=s, cost_usd=c))
        return out

    def p_lands(self, f: Features) -> tuple[float, float]:
        """(P(accept), P(lands)) of a candidate with features ``f``."""
        p = self.beta.p_accept(f.keys())
        return p, p * self.land.p_land(f.land_keys()) if self.use_land else p

    def decision(self, f: Features, text: str, *, saving_s: float, cost_usd: float) -> Decision:
        """The numbers and the rule for one candidate (also replayed offline: bench/policy_cv.py)."""
        p, land = self.p_lands(f)
        return Decision(
            text=text,
            rank=f.rank,
            p_accept=p,
            p_land=land,
            expected_saving_s=saving_s,
            expected_cost_usd=cost_usd,
            value=self.value,
            fork=should_fork(p=land, saving_s=saving_s, cost_usd=cost_usd, value=self.value),
            features=f.as_dict(),
        )

    def observe_choice(
        self, decisions: Sequence[Decision], chosen: int | None, *, time_to_decision_s: float
    ) -> None:
        """The user sent candidate ``chosen`` (None: none of them)."""
        for d in decisions:
            self.beta.observe(_features(d).keys(), d.rank == chosen)
        self._outcome = "accepted" if chosen is not None else "ignored"
        self.decision_s = time_to_decision_s
        taken = [d for d in decisions if d.rank == chosen and d.fork]
        self._landing = _features(taken[0]).land_keys() if taken else None

    def observe_turn(self, *, latency_s: float, time_saved_s: float | None) -> None:
        """A finished turn: what a right fork saved (a used fork's measured saving) or would have saved; and
        for a taken fork, whether its work landed (it was used)."""
        if self._landing is not None:
            self.land.observe(self._landing, time_saved_s is not None)
            self._landing = None
        if time_saved_s is not None:
            self.saving.observe(time_saved_s)
        else:
            self.saving.observe(min(latency_s, self.decision_s) if self.decision_s is not None else latency_s)
        self.decision_s = None

    # -- persistence -----------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        est = {name: [m.n, m.total] for name, m in self._estimates().items()}
        return {"version": 1, "counts": self.beta.counts, "land_counts": self.land.counts, "estimates": est}

    def load_state(self, data: dict[str, Any]) -> None:
        """Counts and estimates from :meth:`state` (a file from another version is ignored)."""
        if not isinstance(data, dict) or data.get("version") != 1:
            return
        counts = data.get("counts") or {}
        self.beta.counts = {str(k): [int(v[0]), int(v[1])] for k, v in counts.items()}
        land = data.get("land_counts") or {}  # a history from before issue #36 has none
        self.land.counts = {str(k): [int(v[0]), int(v[1])] for k, v in land.items()}
        for name, m in self._estimates().items():
            n, total = (data.get("estimates") or {}).get(name, (0, 0.0))
            m.n, m.total = int(n), float(total)

    def _estimates(self) -> dict[str, MeanEstimate]:
        return {
            "saving_s": self.saving,
            "requests": self.cost.requests,
            "written": self.cost.written,
            "output": self.cost.output,
        }

    def load(self, path: Path) -> None:
        try:
            self.load_state(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, IndexError):
            pass  # no history yet (or an unreadable one): start from the priors

    def save(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.state()), encoding="utf-8")
        os.replace(tmp, path)


def _features(d: Decision) -> Features:
    """A decision's features as recorded (one recorded before issue #36 gets its boundary from its text)."""
    f = d.features
    return Features(
        rank=d.rank,
        prev=f.get("prev", "none"),
        tools=f.get("tools", "none"),
        context=f.get("context", "<8k"),
        first_word=f.get("first_word", ""),
        length=f.get("length", "1"),
        boundary=f.get("boundary") or boundary_of(d.text),
    )


@dataclass(frozen=True, kw_only=True)
class Options:
    """The policy's and top-K's knobs for a session: the settings' ``speculation`` key, under the command
    line's ``--spec-value`` / ``--spec-candidates`` (SessionConfig)."""

    value: float | None = None
    candidates: int = 1
    budget_tokens: int | None = None
    budget_cpus: int | None = None
    prior: tuple[float, float] = DEFAULT_PRIOR
    pooling: float = DEFAULT_POOLING
    persist: bool = False
    # SessionConfig.spec_edits resolved (over the settings' speculation.edits): a fork's edit the live path
    # would ask about, asked on acceptance or stopped before
    edits: SpecEdits = "stop"


def options_for(cfg: SessionConfig, settings: Any) -> Options:
    """``cfg`` a SessionConfig, ``settings`` the workspace's merged settings."""
    sp = settings.policy
    value = cfg.spec_value if cfg.spec_value is not None else sp.value
    return Options(
        value=None if value is not None and math.isinf(value) else value,
        candidates=cfg.spec_candidates or sp.candidates,
        budget_tokens=sp.budget.tokens,
        budget_cpus=sp.budget.cpus,
        prior=tuple(sp.prior),
        pooling=sp.pooling,
        persist=sp.persist,
        edits=cfg.spec_edits or sp.edits or cfg.spec_edits_default,
    )


def for_session(host: Host, opts: Options) -> SpecPolicy:
    """The session's policy; with ``persist``, starting from the project's history."""
    pol = SpecPolicy(
        value=opts.value,
        model_name=host.cfg.model_name,
        beta=BetaBackoff(prior=opts.prior, pooling=opts.pooling),
    )
    if host.cfg.spec_history:
        pol.load_state(host.cfg.spec_history)
    if opts.persist:
        pol.load(policy_path(host.project))
    return pol


def persist(pol: SpecPolicy, host: Host, opts: Options) -> None:
    if opts.persist:
        try:
            pol.save(policy_path(host.project))
        except OSError:
            pass  # a history not kept is no reason to fail the session's end


def policy_path(project: Path) -> Path:
    """Where a project's policy history is kept: the state dir (``$SPECULATE_STATE_DIR``), beside the
    projects' journals and overlays but outside their directories (which are removed when idle)."""
    from overlayfs.state import state_root

    key = hashlib.sha256(os.fsencode(os.path.realpath(project))).hexdigest()[:16]
    return state_root() / "policy" / f"{key}.json"
