"""kvstore/SPEC.md prints the pair's state machine ("The pair"): the table there is the code's
(kvstore/src/pair_state.cpp kPairTable), cell for cell."""

from __future__ import annotations

from pathlib import Path

from sectorflow._core import kvstore

SPEC = Path(__file__).resolve().parents[2] / "kvstore" / "SPEC.md"
BEGIN, END = "<!-- pair-table:begin -->", "<!-- pair-table:end -->"


def rendered() -> str:
    """The table as markdown: a row per state, a column per event; a cell names the next state
    (in bold where it changes; the backup's apart where it differs) and whether a request is served."""
    rows: dict[str, dict[str, str]] = {}
    events: list[str] = []
    for state, event, primary, backup, serve, _ in kvstore.pair_table():
        if event not in events:
            events.append(event)
        cell = f"**{primary}**" if primary != state else primary
        if backup != primary:
            cell += f" (backup: **{backup}**)" if backup != state else f" (backup: {backup})"
        if event.startswith("request"):
            cell += ", served" if serve else ", refused"
        rows.setdefault(state, {})[event] = cell
    lines = ["| state \\ event | " + " | ".join(events) + " |", "| --- |" + " --- |" * len(events)]
    lines += [f"| {state} | " + " | ".join(cells[e] for e in events) + " |" for state, cells in rows.items()]
    return "\n".join(lines)


def test_the_spec_prints_the_pair_table_the_code_runs() -> None:
    text = SPEC.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, f"{SPEC}: no {BEGIN} ... {END} block"
    printed = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert printed == rendered(), "kvstore/SPEC.md's pair table differs from kPairTable; print it again:\n" + rendered()


def test_every_state_change_and_refusal_says_why() -> None:
    for state, event, primary, backup, serve, why in kvstore.pair_table():
        refused = event.startswith("request") and not serve and state != "passive"
        if primary != state or backup != state or refused:
            assert why, (state, event)
