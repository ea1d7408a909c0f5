"""CI runs the quick profile end to end, as a user would: agefast, cross-checked by Go age and pyrage."""

import json
import subprocess
import sys


def test_quick_run_passes(tmp_path):
    p = subprocess.run([sys.executable, "-m", "torture", "--quick", "--report", str(tmp_path)],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    data = json.loads((tmp_path / "agefast.json").read_text())
    assert {"strata", "oracles", "cases", "failures", "axes", "not_run", "disagreements"} <= data.keys()
    assert {"age-cli", "pyrage", "reference"} <= set(data["oracles"])
    assert all(data["oracle_files"].get(o, 0) > 100 for o in ("age-cli", "pyrage", "reference")), data["oracle_files"]
    assert data["strata"] == ["Micro", "SubSIMD", "Nominal", "Edge", "Jumbo", "MultiStream", "Boundary", "Long"]
    assert data["cases"] >= 1000
    assert data["failures"] == 0
    assert {r["axis"] for r in data["axes"]} == {"roundtrip", "adversarial-io", "keys", "tamper"}
    for oracle in ("pyrage", "age-cli"):
        assert json.loads((tmp_path / f"{oracle}.json").read_text())["failures"] == 0
    assert (tmp_path / "index.html").read_text().startswith("<!doctype html>")
