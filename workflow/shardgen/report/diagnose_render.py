"""`shardgen diagnose` as text: per path, the finding codes, the efficiency line, then each finding's message,
changes and evidence."""


def _efficiency_line(eff: dict | None, note: str | None) -> str:
    if not eff:
        return f"  {note}"
    return (f"  efficiency: {eff['achieved_tflops']} TFLOP/s ({eff['of_peak_tflops']:.1%} of {eff['peak_tflops']}), "
            f"{eff['achieved_tbps']} TB/s ({eff['of_peak_tbps']:.1%} of {eff['peak_tbps']}) on {eff['gpu']}; "
            f"{eff['bound']}-bound ({eff['flops_per_byte']} FLOP/byte, ridge {eff['ridge_flops_per_byte']}); "
            f"{eff['dominant_bytes']} moves the most bytes per step "
            f"({', '.join(f'{k} {v / 1e9:.2f} GB' for k, v in eff['bytes_per_step'].items())})"
            + (f"; WARNING: {eff['warning']}" if eff["warning"] else ""))


def render(result: dict) -> str:
    out = []
    for path, entry in result.items():
        findings = entry["findings"]
        out.append(f"{path}: " + (", ".join(f["code"] for f in findings) or "no bottleneck found"))
        out.append(_efficiency_line(entry["efficiency"], entry["efficiency_note"]))
        for f in findings:
            out += [f"  [{f['code']}] {f['message']}"] + [f"    change: {a}" for a in f["advice"]]
            out += [f"    evidence: {e[:220]}" for e in f["evidence"]]
    return "\n".join(out)
