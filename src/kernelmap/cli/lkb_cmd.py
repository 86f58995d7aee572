"""CLI: `kernelmap lkb` prints the LKB convergence metrics of a class; subcommands check promotions and keep ledgers.

Input: flags (class, step profile or model, measurements file). Output: the gap lines for C1/C16/C128,
the LKB residual, parameterization yield and evidence envelopes (text or `--json`); `promote-check`,
`check` and `campaign start|exit`. The logic lives in kernelmap.lkb; this module only parses and prints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kernelmap.errors import LKBError

__all__ = ["register"]

_PATH = click.Path(dir_okay=False, path_type=Path)


def _measurements(path: Path | None) -> Path | None:
    if path is not None:
        return path
    from kernelmap.bench.record import default_measurements_path

    default = default_measurements_path()
    return default if default.exists() else None


@click.group("lkb", invoke_without_command=True)
@click.option("-m", "--model", type=_PATH, default=None, help="Measure the step profile of this GGUF model.")
@click.option("--class", "cls", default=None, help="Hardware class (default: this host's).")
@click.option("--profile", "profile_path", type=_PATH, default=None,
              help="Per-op step profile JSON (kernelmap.lkb_profile/1, see docs/LKB.md).")
@click.option("--measurements", type=_PATH, default=None,
              help="Measurements TOML from `kernelmap bench` (default: $KERNELMAP_MEASUREMENTS or ./measurements.toml).")
@click.option("--save-profile", type=_PATH, default=None, help="With -m: also write the measured profile here.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def lkb(ctx: click.Context, model: Path | None, cls: str | None, profile_path: Path | None,
        measurements: Path | None, save_profile: Path | None, as_json: bool) -> None:
    """LKB coverage gap lines (C1, C16, C128), LKB residual, parameterization yield, evidence envelopes.

    Example: kernelmap lkb --profile step_profile.json --measurements measurements.toml
    """
    ctx.ensure_object(dict)
    ctx.obj.update(cls=cls, measurements=measurements)
    if ctx.invoked_subcommand is not None:
        return
    from kernelmap.lkb.report import build_report, report_lines

    if model is not None and profile_path is not None:
        raise LKBError("give either -m MODEL or --profile FILE, not both", pointer="--profile")
    if model is not None:
        from kernelmap.lkb._io import write_text_atomic
        from kernelmap.lkb.evidence import ROWS
        from kernelmap.lkb.profile import measure, profile_document
        from kernelmap.target import host_class

        steps = {}
        for rows in ROWS:
            print(f"profiling {model.name} at C{rows}", file=sys.stderr)
            steps[rows] = measure(model, rows)
        doc = profile_document(steps, model=str(model), cls=host_class())
        if save_profile is None:
            import tempfile

            save_profile = Path(tempfile.mkdtemp(prefix="km-lkb-")) / "profile.json"
        write_text_atomic(save_profile, json.dumps(doc, indent=1))
        print(f"profile: {save_profile}", file=sys.stderr)
        profile_path = save_profile
    report = build_report(cls, profile_path=profile_path, measurements=_measurements(measurements))
    if as_json:
        click.echo(json.dumps(report, indent=1, sort_keys=True, default=str))
    else:
        click.echo("\n".join(report_lines(report)))


@lkb.command("check")
@click.option("--write-forks", is_flag=True, help="Rewrite lkb/FORKS.md from the class files.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def check_cmd(write_forks: bool, as_json: bool) -> None:
    """Check that every kernel-map variant is in exactly one family point (or list it as residual).

    Example: kernelmap lkb check --write-forks
    """
    from kernelmap.lkb._io import write_text_atomic
    from kernelmap.lkb.coverage import check_providers
    from kernelmap.lkb.registry import load_chain
    from kernelmap.lkb.report import FORKS_PATH, render_forks

    chain = load_chain()
    result = check_providers(chain)
    if write_forks:
        write_text_atomic(FORKS_PATH, render_forks(chain, result))
        print(f"wrote {FORKS_PATH}", file=sys.stderr)
    if as_json:
        click.echo(json.dumps({"ok": result.ok, "assigned": {f"{p}:{v}": f"{f}/{pt}" for (p, v), (f, pt)
                                                              in sorted(result.assigned.items())},
                               "findings": result.lines()}, indent=1, sort_keys=True))
    else:
        click.echo(f"{len(result.assigned)} of {len(result.variants)} variants in a family point")
        for line in result.lines():
            click.echo(line)
    if not result.ok:
        raise LKBError(f"{len(result.lines())} registry findings (conflict, dangling or unrealizable points)",
                       pointer="KERNEL_FAMILIES.toml", hint="fix the points named above")


@lkb.command("promote-check")
@click.argument("points", nargs=-1, required=True)
@click.option("--noise", type=float, default=None, help="Relative noise band (default: read from measurements).")
@click.option("--no-run", is_flag=True, help="Do not build and run the variants (byte check then blocks).")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.pass_context
def promote_cmd(ctx: click.Context, points: tuple[str, ...], noise: float | None, no_run: bool,
                as_json: bool) -> None:
    """Apply the promotion rule to family POINTS (the first is the candidate form); exit 1 when refused.

    Example: kernelmap lkb promote-check linear_q4_k_q8_k.avx512 linear_q4_k_q8_k.avx2
    """
    from kernelmap.lkb.evidence import load_measurements
    from kernelmap.lkb.promote import promote_check
    from kernelmap.lkb.registry import load_chain
    from kernelmap.target import target_features

    path = _measurements(ctx.obj.get("measurements"))
    rows = load_measurements(path) if path is not None else []
    report = promote_check(load_chain(), points, rows, features=target_features(), noise=noise, run=not no_run)
    if as_json:
        click.echo(json.dumps({"points": report.points, "family": report.family, "users": report.users,
                               "checks": report.checks, "promote": report.promote}, indent=1, sort_keys=True))
    else:
        click.echo("\n".join(report.lines()))
    if not report.promote:
        failed = [f"{k}: {c['verdict']}" for k, c in report.checks.items() if c["verdict"] != "pass"]
        raise LKBError("promotion refused (" + "; ".join(failed) + ")", pointer="POINTS", value=list(points))


@lkb.group("campaign")
def campaign() -> None:
    """Start or exit a campaign ledger (lkb/campaigns/NAME.toml) with TTBP/TTPV and residual metrics.

    Example: kernelmap lkb campaign start avx512_templates --ttbp 0
    """


def _hours_options(fn):
    fn = click.option("--ttpv-energy", type=float, default=None, help="Hours to an energy win.")(fn)
    fn = click.option("--ttpv-speed", type=float, default=None, help="Hours to a speed win.")(fn)
    fn = click.option("--ttbp", type=float, default=None, help="Hours to bit parity.")(fn)
    fn = click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path), default=None,
                      help="Ledger folder (default: the package's lkb/campaigns).")(fn)
    return click.option("--profile", "profile_path", type=_PATH, default=None, help="Step profile JSON.")(fn)


def _current(ctx: click.Context, profile_path: Path | None) -> dict:
    from kernelmap.lkb.report import build_report, campaign_metrics

    report = build_report(ctx.obj.get("cls"), profile_path=profile_path,
                          measurements=_measurements(ctx.obj.get("measurements")))
    return {"class": report["class"], "metrics": campaign_metrics(report)}


@campaign.command("start")
@click.argument("name")
@click.option("--model", default="", help="Model the campaign targets (recorded only).")
@_hours_options
@click.pass_context
def campaign_start(ctx: click.Context, name: str, model: str, profile_path: Path | None, folder: Path | None,
                   ttbp: float | None, ttpv_speed: float | None, ttpv_energy: float | None) -> None:
    """Record the start metrics of campaign NAME.

    Example: kernelmap lkb --class x86_64_v3 campaign start v3_templates --model model.gguf
    """
    from kernelmap.lkb.campaign import CAMPAIGNS_DIR, start_campaign

    now = _current(ctx, profile_path)
    path = start_campaign(name, now["class"], now["metrics"], model=model, ttbp=ttbp, ttpv_speed=ttpv_speed,
                          ttpv_energy=ttpv_energy, folder=folder or CAMPAIGNS_DIR)
    click.echo(f"started {path}")


@campaign.command("exit")
@click.argument("name")
@click.option("--promoted", multiple=True, help="A family / point / policy / numerics point promoted (repeat).")
@click.option("--parity", is_flag=True, help="Bit parity holds now: without --ttbp, TTBP = hours since the start.")
@_hours_options
@click.pass_context
def campaign_exit(ctx: click.Context, name: str, promoted: tuple[str, ...], parity: bool, profile_path: Path | None,
                  folder: Path | None, ttbp: float | None, ttpv_speed: float | None,
                  ttpv_energy: float | None) -> None:
    """Record the exit metrics of campaign NAME and print its two exit lines.

    Example: kernelmap lkb campaign exit v3_templates --promoted linear.kquant_dot/lanes --ttbp 2.5
    """
    from kernelmap.lkb.campaign import CAMPAIGNS_DIR, exit_campaign

    now = _current(ctx, profile_path)
    path, lines = exit_campaign(name, now["metrics"], promoted, ttbp=ttbp, ttpv_speed=ttpv_speed,
                                ttpv_energy=ttpv_energy, parity=parity, folder=folder or CAMPAIGNS_DIR)
    click.echo("\n".join(lines))
    print(f"ledger: {path}", file=sys.stderr)


def register(cli: click.Group) -> None:
    """Add `lkb` to the CLI group."""
    cli.add_command(lkb)
