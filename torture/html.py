"""The HTML report: one self-contained page (no scripts, no external files)
with every party side by side, what was not run and why, and each group of
disagreements with both outcomes, plaintext hashes and its reproducer."""

import html
import re

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d1d1f;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px}th,td{border:1px solid #d0d0d0;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{background:#e3f4e1}.bad{background:#fbe0dc}.skip{background:#f4f0dc}.muted{color:#777}
code,.h{font-family:ui-monospace,Menlo,monospace;font-size:12px}.verdict{font-size:16px;font-weight:600}
details{margin:2px 0}summary{cursor:pointer}
"""


def _e(x) -> str:
    return html.escape(str(x))


def _name(name: str) -> str:
    """A party's name with directories dropped from its paths (the full name on hover)."""
    short = re.sub(r"(?<![\w{])/(?:[^\s/]+/)+", "", name)
    return f'<code title="{_e(name)}">{_e(short)}</code>'


def _hash(sha: str, nbytes: int) -> str:
    return f'<span class="h" title="{_e(sha)}">{_e(sha[:16])}…</span> <span class="muted">({nbytes} B)</span>'


def _summary(reports) -> str:
    rows = []
    for r in reports:
        cls = "bad" if r["failures"] else "ok"
        rows.append(f'<tr><td>{_name(r["implementation"])}</td><td>{_e(r["role"])}</td>'
                    f'<td class="n">{r["files"] or "-"}</td><td class="n">{r["cases"]}</td>'
                    f'<td class="n {cls}">{r["agreements"]}</td><td class="n {cls}">{r["failures"]}</td>'
                    f'<td class="n">{sum(r["not_run"].values())}</td><td class="n">{r["target_seconds"]:.1f}</td></tr>')
    return ('<table><tr><th>party</th><th>role</th><th>files</th><th>cases</th><th>agree</th><th>disagree</th>'
            '<th>not run</th><th>seconds waited</th></tr>' + "".join(rows) + "</table>")


def _matrix(reports) -> str:
    order = {name: i for i, name in enumerate(reports[0]["strata"])}
    keys = sorted({(row["stratum"], row["axis"]) for r in reports for row in r["axes"]},
                  key=lambda k: (order.get(k[0], len(order)), k[1]))
    cells = {(r["implementation"], row["stratum"], row["axis"]): row for r in reports for row in r["axes"]}
    head = "".join(f"<th>{_name(r['implementation'])}</th>" for r in reports)
    out = [f"<table><tr><th>stratum</th><th>axis</th>{head}</tr>"]
    for stratum, axis in keys:
        tds = []
        for r in reports:
            c = cells.get((r["implementation"], stratum, axis))
            if c is None:
                tds.append('<td class="muted">-</td>')
                continue
            cls = "bad" if c["failures"] else ("ok" if c["cases"] else "skip")
            skip = f' <span class="muted">+{c["not_run"]} not run</span>' if c["not_run"] else ""
            tds.append(f'<td class="n {cls}">{c["cases"] - c["failures"]}/{c["cases"]}{skip}</td>')
        out.append(f"<tr><td>{_e(stratum)}</td><td>{_e(axis)}</td>{''.join(tds)}</tr>")
    return "".join(out) + "</table>"


def _not_run(reports) -> str:
    out = []
    for r in reports:
        items = [f"<li>{_e(reason)}: {n} cases</li>" for reason, n in sorted(r["not_run"].items())]
        items += [f'<li class="muted">declared: {_e(d)}</li>' for d in r["declared"] if d not in r["not_run"]]
        if items:
            out.append(f"<h3>{_name(r['implementation'])}</h3><ul>{''.join(items)}</ul>")
    return "".join(out) or '<p class="muted">Every party was asked every case.</p>'


def _disagreements(r) -> str:
    if not r["disagreements"]:
        return ""
    rows = []
    for g in r["disagreements"]:
        repro = (f'<a href="{_e(g["reproducer"])}/README.txt" title="{_e(g["reproducer"])}">'
                 f'<code>{_e(g["reproducer"].rsplit("/", 1)[-1])}</code></a>'
                 if g["reproducer"] else '<span class="muted">no file</span>')
        cases = "".join(f"<li><code>{_e(c['case'])}</code>: {_e(c['problem'])}</li>" for c in g["cases"][:200])
        more = f"<li>… {g['count'] - 200} more</li>" if g["count"] > 200 else ""
        rows.append(
            f"<tr><td>{_e(g['stratum'])}</td><td>{_e(g['axis'])}</td>"
            f"<td><b>{_e(g['reference'])}</b> <span class=muted>{_e(g['reference_detail'])}</span><br>"
            f"{_hash(g['reference_sha256'], g['reference_bytes'])}</td>"
            f"<td><b>{_e(g['target'])}</b> <span class=muted>{_e(g['message'][:160])}</span><br>"
            f"{_hash(g['target_sha256'], g['target_bytes'])}</td>"
            f"<td class=n>{g['count']}</td><td><details><summary><code>{_e(g['cases'][0]['case'])}</code>"
            f"</summary><ul>{cases}{more}</ul></details></td><td>{repro}</td></tr>")
    return (f"<h3>{_name(r['implementation'])}: {r['failures']} disagreements in "
            f"{len(r['disagreements'])} groups</h3>"
            "<table><tr><th>stratum</th><th>axis</th><th>reference (verified plaintext)</th>"
            "<th>target (released plaintext)</th><th>cases</th><th>first case (all in the group)</th>"
            "<th>reproducer</th></tr>" + "".join(rows) + "</table>")


def page(reports, seconds: float, exit_status: int) -> str:
    """The page for the parties' JSON reports (report.party_json), in order."""
    first = reports[0]
    verdict = {0: "every target agrees with the reference",
               2: "nothing was tested: no case applied to the targets"}.get(exit_status, "disagreements found")
    body = [
        "<h1>agetorture report</h1>",
        f'<p class="verdict {"ok" if exit_status == 0 else "bad"}">{_e(verdict)}</p>',
        f"<p>{_e(first['profile'])} profile, seed {first['seed']}, strata {_e(', '.join(first['strata']))}; "
        f"{seconds:.1f} s on {_e(first['machine'])}, finished {_e(first['finished'])}.</p>",
        "<h2>Parties</h2>", _summary(reports),
        '<p class="muted">A case agrees when the party gives the reference\'s outcome: the same success or '
        "failure, the same plaintext on success, the same failure kind where the party names one, and on failure "
        "nothing released beyond what the reference verified.</p>",
        "<h2>Disagreements</h2>",
        "".join(_disagreements(r) for r in reports) or '<p class="ok">None.</p>',
        "<h2>Side by side (agreeing / asked)</h2>", _matrix(reports),
        '<p class="muted">The reference column counts its own check of each case: its verdict must be one the '
        "case intends.</p>",
        "<h2>Not run</h2>", _not_run(reports),
    ]
    return (f"<!doctype html><html><head><meta charset=utf-8><title>agetorture report</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>")
