"""The ledger as a reader sees it: each paper's primary claims first (verdict, estimate, interval, n,
power), then the counts of the secondary paper claims per outcome, the line saying how many false
decisions the rule expects, and each paper's table.

Only `paper` claims say whether the paper reproduced; floors, gates and accounting are counted apart
("paper claims 6 PASS · 2 FAIL · 3 INCONCLUSIVE; floors 4/4; gates 14/14; accounting 3/3"), and
diagnostics are listed but never counted.
"""
from __future__ import annotations

from typing import Sequence

from .claims_evidence import FAIL, INCONCLUSIVE, MIN_UNITS, NOT_RUN, PASS, UNTESTABLE, fmt, plural
from .claims_multiplicity import FAMILYWISE, FDR, expected_false
from .claims_spec import KINDS
from .intervals import LEVEL

STATUSES = (PASS, FAIL, INCONCLUSIVE, UNTESTABLE, NOT_RUN)
KIND_LABELS = {"paper": "paper claims", "floor": "floors", "gate": "gates", "accounting": "accounting",
               "diagnostic": "diagnostics"}


def counts(results: Sequence) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in STATUSES}


def kind_summary(results: Sequence) -> dict:
    """{kind: {status: count}} for the kinds present, in KINDS order."""
    return {k: counts([r for r in results if r.kind == k]) for k in KINDS if any(r.kind == k for r in results)}


def summary_line(results: Sequence) -> str:
    """E.g. "paper claims 6 PASS · 2 FAIL · 3 INCONCLUSIVE; floors 4/4; gates 14/14; accounting 3/3"."""
    parts = []
    by_kind = kind_summary(results)
    paper = by_kind.get("paper")
    if paper is None:
        parts.append("no paper claims")
    else:
        shown = [s for s in STATUSES if paper[s] or s in (PASS, FAIL, INCONCLUSIVE)]
        parts.append("paper claims " + " · ".join(f"{paper[s]} {s}" for s in shown))
    for kind in ("floor", "gate", "accounting"):
        if kind in by_kind:
            c = by_kind[kind]
            total = sum(c.values())
            extra = "".join(f", {c[s]} {s}" for s in STATUSES[1:] if c[s])
            parts.append(f"{KIND_LABELS[kind]} {c[PASS]}/{total} PASS{extra}")
    if "diagnostic" in by_kind:
        parts.append(f"diagnostics {sum(by_kind['diagnostic'].values())} (not counted)")
    return "; ".join(parts)


def tested_line(results: Sequence) -> str:
    """"m claims tested; under this rule at most k false decisions are expected" over the paper claims
    decided as families (a p-value: stochastic, testable, enough units)."""
    tested = [r for r in results if getattr(r, "family", None)]
    papers = {r.paper for r in tested if r.family == "primary"}
    decided = sum(r.family == "secondary" and r.status in (PASS, FAIL) for r in tested)
    return (f"{len(tested)} claims tested; under this rule at most {expected_false(len(papers), decided):.1f} "
            f"false decisions are expected (Holm at {FAMILYWISE:.0%} familywise over each paper's primaries, "
            f"Benjamini–Hochberg at q = {FDR:.2f} over the {decided} secondary decisions)")


def power_text(r) -> str:
    """E.g. "detects ≥ 0.041 · needs ≈ 11 seeds"."""
    parts = [f"detects ≥ {fmt(r.detectable)}"] if getattr(r, "detectable", None) is not None else []
    if getattr(r, "needs", None) and r.status == INCONCLUSIVE:
        parts.append(f"needs ≈ {plural(r.needs, r.unit)}")
    return " · ".join(parts) or "–"


def primary_table(results: Sequence) -> list[str]:
    """Each paper's primary claims: verdict, estimate, interval, n, Holm-adjusted p, power."""
    rows = [r for r in results if getattr(r, "primary", False)]
    if not rows:
        return ["No primary claims are marked yet (`primary: true`): every paper claim is secondary."]
    lines = ["| paper | primary claim | verdict | estimate | 90% interval | n | p (Holm) | 80 % power |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r.paper):
        interval = f"[{fmt(r.lo)}, {fmt(r.hi)}]" if r.lo is not None else "–"
        n = plural(r.n, r.unit) if r.n else "–"
        lines.append(f"| {r.paper} | {r.id} | **{r.status}** | {fmt(r.reproduced)} | {interval} | {n} | "
                     f"{fmt(r.p_adjusted)} | {power_text(r)} |")
    return lines


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def _p_text(r) -> str:
    if r.p is None:
        return "–"
    adjusted = {"primary": "Holm", "secondary": "q"}.get(r.family)
    return f"{r.p:.3g}" + (f" ({adjusted} {r.p_adjusted:.3g})" if adjusted else "")


def to_markdown(results: Sequence, profile: str) -> str:
    """The summary per paper (paper claims first), then each paper's rows, paper claims first."""
    papers = list(dict.fromkeys(sorted(r.paper for r in results)))
    paper_rows = [r for r in results if r.kind == "paper"]
    total = counts(paper_rows)
    lines = [
        f"# Claims ledger: profile `{profile}`",
        "",
        "## Primary claims",
        "",
        *primary_table(results),
        "",
        f"{tested_line(results)}.",
        "",
        f"Paper claims, all papers: {', '.join(f'{total[s]} {s}' for s in STATUSES)}. Floors, gates and "
        "accounting are checks of the set-up, counted apart; diagnostics are reported, never counted. "
        "UNTESTABLE: a floor or gate the claim rests on did not pass (its own interval is shown, not counted).",
        "",
        f"Each sample is decided by the {LEVEL:.0%} interval of its mean: t up to 30 units, a percentile "
        "bootstrap above; on the group means when the values rest on trained components (priors, bases, "
        "cohorts: n is the number of groups); the corrected resampled t (Nadeau–Bengio) for "
        "cross-validation folds; the exact Clopper–Pearson interval for counts and 0/1 outcomes. "
        f"Comparisons use the paired differences Δ. Fewer than {MIN_UNITS} units (groups) is INCONCLUSIVE. "
        "Plain numbers are deterministic and decided `exact`. Knob claims test a trend (the per-replicate "
        "slope) or where a point test holds along a world knob.",
        "",
        "Secondary paper claims per outcome (the primaries are above):",
        "",
        "| paper | secondary PASS | FAIL | INCONCLUSIVE | UNTESTABLE | NOT RUN | floors | gates | accounting | diagnostics |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for paper in papers:
        rows = [r for r in results if r.paper == paper]
        by_kind = kind_summary(rows)
        c = counts([r for r in rows if r.kind == "paper" and not getattr(r, "primary", False)])
        other = [f"{by_kind[k][PASS]}/{sum(by_kind[k].values())}" if k in by_kind else "–"
                 for k in ("floor", "gate", "accounting")]
        diag = str(sum(by_kind["diagnostic"].values())) if "diagnostic" in by_kind else "–"
        lines.append(f"| {paper} | " + " | ".join(str(c[s]) for s in STATUSES) + f" | {' | '.join(other)} | {diag} |")
    by_id = {r.id: r for r in results}
    order = {k: i for i, k in enumerate(KINDS)}
    for paper in papers:
        rows = sorted((r for r in results if r.paper == paper), key=lambda r: order.get(r.kind, len(order)))
        lines += ["", f"## {paper}", "", f"{summary_line(rows)}.", "",
                  "| id | kind | claim | paper value | estimate | 90% interval | n | test | status | p (adjusted) | 80 % power | robust | floors | audit | note |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            interval = "exact" if r.evidence == "exact" else (
                f"[{fmt(r.lo)}, {fmt(r.hi)}]" if r.lo is not None else "–")
            n = plural(r.n, r.unit) if r.n else ("–" if r.evidence != "exact" else "exact")
            floors = "(is a floor)" if r.kind == "floor" else (
                ", ".join(f"{f}: {by_id[f].status if f in by_id else '?'}" for f in r.floors) or "none")
            audit = "; ".join(r.audit) or "ok"
            lines.append(
                f"| {r.id} | {r.kind} | {_cell(r.claim)} | {fmt(r.paper_value)} | {fmt(r.reproduced)} | {interval} | {n} | "
                f"`{r.metric}` {_cell(r.test)} | **{r.status}**{' (primary)' if r.primary else ''} | {_p_text(r)} | "
                f"{power_text(r)} | {r.robust or '–'} | {floors} | {_cell(audit)} | "
                f"{r.note.replace('|', '/')} |"
            )
    return "\n".join(lines) + "\n"
