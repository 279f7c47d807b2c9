"""plot_fit on small fits of known laws: what is drawn, where, and how it is saved."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

from scalebo.fitting.bootstrap import bootstrap_fit  # noqa: E402
from scalebo.fitting.robust import fit_law  # noqa: E402
from scalebo.laws import get_law  # noqa: E402
from scalebo.plotting import law_curve, plot_fit  # noqa: E402

TRUTH_C = {"E": 1.8, "A": 600.0, "alpha": 0.15}
TRUTH_ND = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}


@pytest.fixture(scope="module")
def compute_fit():
    rng = np.random.default_rng(0)
    C = np.geomspace(1e18, 1e21, 10)
    loss = (TRUTH_C["E"] + TRUTH_C["A"] * C ** -TRUTH_C["alpha"]) * np.exp(
        rng.normal(0, 0.002, C.size))
    frame = pd.DataFrame({"C": C, "loss": loss})
    runs = pd.concat([frame, frame.assign(loss=frame["loss"] + 0.1)], ignore_index=True)
    fit = fit_law(get_law("compute"), C[:, None], loss)
    boot = bootstrap_fit(fit, C[:, None], loss, n_resamples=30, rng=1)
    return runs, frame, fit, boot


@pytest.fixture(scope="module")
def chinchilla_fit():
    law = get_law("chinchilla")
    N, D = (g.ravel() for g in np.meshgrid(np.geomspace(1e8, 1e10, 4), np.geomspace(1e9, 1e11, 4)))
    loss = TRUTH_ND["E"] + TRUTH_ND["A"] / N ** TRUTH_ND["alpha"] + TRUTH_ND["B"] / D ** TRUTH_ND[
        "beta"]
    X = np.column_stack([N, D])
    # A few starts near the truth keep this fast; the full 4,500-start grid is tested elsewhere.
    start = law.from_natural(TRUTH_ND)
    starts = start + np.array([[0.0] * 5, [0.3, 0.5, 0.05, -0.5, 0.05]])
    fit = fit_law(law, X, loss, starts=starts)
    frame = pd.DataFrame({"N": N, "D": D, "C": 6 * N * D, "loss": loss})
    return frame, fit


def _lines(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def test_compute_plot_elements_and_file(compute_fit, tmp_path: Path) -> None:
    runs, frame, fit, boot = compute_fit
    path = tmp_path / "fit.png"
    fig = plot_fit(runs, frame, fit, bootstrap=boot, predict_at=[1e23], path=path)
    assert path.read_bytes()[:4] == b"\x89PNG"
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "FLOPs" in ax.get_xlabel() and "nats" in ax.get_ylabel()
    lines = _lines(ax)
    solid, dashed = lines["fit L(C)"], lines["extrapolation"]
    # The solid curve spans the fitted compute range; the dashed one continues to 1e23 FLOPs.
    assert solid.get_xdata()[0] == pytest.approx(1e18) and solid.get_xdata()[-1] == 1e21
    assert dashed.get_linestyle() == "--" and dashed.get_xdata()[-1] == pytest.approx(1e23)
    x = np.asarray(solid.get_xdata())
    np.testing.assert_allclose(solid.get_ydata(), fit.predict(x[:, None]), rtol=1e-12)
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1 and "bootstrap" in bands[0].get_label()
    # The band brackets the fitted curve.
    verts = bands[0].get_paths()[0].vertices
    at_1e23 = verts[np.isclose(verts[:, 0], 1e23, rtol=1e-9), 1]
    pred = fit.predict(np.array([[1e23]]))[0]
    assert at_1e23.min() <= pred <= at_1e23.max()
    # All runs light, fitted runs highlighted: two scatter collections with those counts.
    counts = sorted(len(c.get_offsets()) for c in ax.collections
                    if not isinstance(c, PolyCollection) and len(c.get_offsets()) > 1)
    assert counts == [10, 20]
    assert not plt.fignum_exists(fig.number)  # closed after saving


def test_no_extrapolation_without_predictions(compute_fit) -> None:
    runs, frame, fit, _ = compute_fit
    fig = plot_fit(runs, frame, fit)
    (ax,) = fig.axes
    assert "extrapolation" not in _lines(ax)
    assert not any(isinstance(c, PolyCollection) for c in ax.collections)
    plt.close(fig)


def test_chinchilla_curve_is_the_compute_optimal_path(chinchilla_fit, tmp_path: Path) -> None:
    frame, fit = chinchilla_fit
    fig = plot_fit(frame, frame, fit, predict_at=[1e24], path=tmp_path / "c.svg")
    assert (tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")
    line = _lines(fig.axes[0])["compute-optimal loss of the fitted L(N, D)"]
    C = np.asarray(line.get_xdata())
    t = TRUTH_ND
    a, b = t["alpha"], t["beta"]
    G = (a * t["A"] / (b * t["B"])) ** (1 / (a + b))
    N, D = G * (C / 6) ** (b / (a + b)), (C / 6) ** (a / (a + b)) / G
    expected = t["E"] + t["A"] / N**a + t["B"] / D**b
    np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-6)


def test_chinchilla_runs_sit_at_the_compute_their_curve_uses(chinchilla_fit) -> None:
    """A trial's table had C = 8·N·D: its runs were drawn at C, the law's path at 6·N·D,
    so the curve sat below every run. Runs of a law in N and D are drawn at 6·N·D."""
    frame, fit = chinchilla_fit
    odd = frame.assign(C=8 * frame["N"] * frame["D"])
    ax = plot_fit(odd, odd, fit).axes[0]
    x = np.asarray(ax.collections[0].get_offsets())[:, 0]
    np.testing.assert_allclose(x, 6 * frame["N"] * frame["D"], rtol=1e-12)
    assert ax.get_xlabel() == "training compute 6·N·D (FLOPs)"


def test_laws_without_a_compute_curve_are_rejected(compute_fit) -> None:
    _, frame, fit, _ = compute_fit
    gadre = replace(fit, law=get_law("gadre"))
    with pytest.raises(ValueError, match="C or in \\(N, D\\)"):
        plot_fit(frame, frame, gadre)
    with pytest.raises(ValueError, match="lacks column"):
        plot_fit(frame.drop(columns="C"), frame, fit)
    assert law_curve(fit, np.array([1e20])).shape == (1,)


def test_trace_figure_shows_every_acquired_run_on_top(tmp_path: Path) -> None:
    """scalebo replay --plot: titled, colourbar, acquired drawn over hollow reference rings,
    and the loss axis spans the whole envelope and every acquired run (cheap ones too)."""
    from test_oracle import tiny_problem

    from scalebo.bench.replay import MethodConfig, replay
    from scalebo.bench.trace_plot import plot_trace, trace_figure

    problem = tiny_problem()
    method = MethodConfig(strategy="window", fantasize=False, posterior_samples=0)
    rec = replay(problem, method, 0.2, 3, record_budgets=[0.05, 0.1])
    fig = trace_figure(rec, problem)
    title = fig.get_suptitle()
    assert "tiny" in title and method.label() in title
    assert "budget 20 % of C_total" in title and "seed 3" in title
    left, right, cbar = fig.axes
    assert "acquisition order" in cbar.get_ylabel()
    idx = np.array([t.index for t in rec.trace])
    lo, hi = right.get_ylim()
    env = problem.loss[problem.envelope_idx]
    assert lo <= min(env.min(), problem.loss[idx].min())
    assert hi >= max(env.max(), problem.loss[idx].max())
    by_label = {c.get_label(): c for c in right.collections}
    ring, acquired = by_label["reference envelope"], by_label["acquired"]
    assert np.all(ring.get_facecolors()[:, 3] == 0)  # hollow
    assert acquired.get_zorder() > ring.get_zorder()
    assert len(acquired.get_offsets()) == idx.size
    off = int((~problem.grid.held_out & ~(problem.loss <= hi)).sum())  # beyond the axis
    grid_label = next(label for label in by_label if label.startswith("grid"))
    assert grid_label == ("grid" + (f" ({off} above the axis or without a loss)" if off else ""))
    # the held-out cells (never acquired) and the budgets recorded on the way are drawn
    held = [label for label in by_label if label.startswith("held out")]
    n_cells = np.unique(problem.grid.cell_ids[problem.grid.held_out]).size
    assert held == [f"held out ({n_cells} cell{'s' if n_cells > 1 else ''}; never acquired)"]
    assert "recorded on the way: 5 %, 10 %" in left.get_legend_handles_labels()[1]
    # the law the replay is scored by, beside the reference, with its error at 1e25
    law = rec.metrics[-1].law("compute")
    own = next(ln for ln in right.get_lines() if "replay's compute law" in ln.get_label())
    x = np.asarray(own.get_xdata())
    p = law.params
    np.testing.assert_allclose(own.get_ydata(), p["E"] + p["A"] * x ** -p["alpha"])
    assert own.get_label().endswith(f"({law.extrapolation_pct['1e+25']:+.2f} % at 1e25 FLOPs)")
    plt.close(fig)
    out = plot_trace(rec, problem, tmp_path / "trace.png")
    assert out.stat().st_size > 10_000


def test_trace_loss_range_keeps_diverged_runs_off_the_axis() -> None:
    from types import SimpleNamespace

    from scalebo.bench.trace_plot import loss_range

    loss = np.r_[np.linspace(2.0, 3.0, 20), 9.5]  # one diverged run (9.5 nats)
    problem = SimpleNamespace(loss=loss, grid=SimpleNamespace(held_out=np.zeros(21, bool)),
                              envelope_idx=np.array([0, 5]))
    assert loss_range(problem, np.array([3, 19, 20])) == (2.0, 3.0)  # 9.5 is above the fence
    assert loss_range(problem, np.array([1]))[1] == pytest.approx(loss[5])
    held = np.zeros(22, bool)
    held[21] = True  # a held-out cell's run below every acquirable loss: still on the axis
    problem = SimpleNamespace(loss=np.r_[loss, 1.7], grid=SimpleNamespace(held_out=held),
                              envelope_idx=np.array([0, 5]))
    assert loss_range(problem, np.array([3, 19, 20])) == (1.7, 3.0)


def test_diverged_runs_sit_on_the_top_edge_and_losses_are_readable(compute_fit) -> None:
    """StepLaw's fit figure: runs at 4-11 nats squashed the 2-3 nat frontier into a third of
    the axis, whose only tick labels were 2 and 3 (a prediction at 1.4 had none)."""
    runs, frame, fit, _ = compute_fit
    diverged = runs.iloc[:3].assign(loss=[9.0, 10.5, 11.0])
    fig = plot_fit(pd.concat([runs, diverged], ignore_index=True), frame, fit,
                   predict_at=[1e25])
    (ax,) = fig.axes
    bottom, top = ax.get_ylim()
    q1, q3 = np.percentile(pd.concat([runs, diverged])["loss"], [25, 75])
    assert top == pytest.approx(1.03 * max(q3 + 3 * (q3 - q1), frame["loss"].max()))
    edge = [c for c in ax.collections if "above" in str(c.get_label())]
    assert len(edge) == 1 and len(edge[0].get_offsets()) == 3
    assert edge[0].get_label().startswith("3 runs above")
    one = plot_fit(pd.concat([runs, diverged.iloc[:1]], ignore_index=True), frame, fit)
    assert [c.get_label() for c in one.axes[0].collections if "above" in str(c.get_label())
            ][0].startswith("1 run above ")  # a trial read "1 runs above"
    labelled = [t for t in ax.get_yticks() if bottom <= t <= top]
    assert len(labelled) >= 4  # e.g. 2, 2.5, 3, 3.5 rather than 2, 3
    pred = fit.predict(np.array([[1e25]]))[0]
    assert [t.get_text() for t in ax.texts] == [f"{pred:.4g}"]  # the value beside the star
    plt.close(fig)


def test_loss_ticks_label_a_range_of_decades_and_the_fence_keeps_predictions() -> None:
    """A review: evenly spaced ticks on a log axis over decades labelled only its top half
    (an error rate from 0.07 down to a prediction at 0.03 had none below 0.2), and the fence
    cut a prediction above it off the axis."""
    C = np.geomspace(1e18, 1e21, 8)
    y = 0.02 + 5e3 * C ** -0.2
    fit = fit_law(get_law("compute"), C[:, None], y)
    frame = pd.DataFrame({"C": C, "loss": y})
    fig = plot_fit(frame, frame, fit, predict_at=[1e26])
    (ax,) = fig.axes
    bottom, top = ax.get_ylim()
    labels = [t for t in ax.get_yticks() if bottom <= t <= top]
    assert min(labels) < 0.1 < max(labels) and len(labels) >= 4
    plt.close(fig)
    runs = pd.concat([frame, frame.iloc[:3].assign(loss=[5.0, 6.0, 7.0])], ignore_index=True)
    fig = plot_fit(runs, frame, fit, predict_at=[1e15])  # far below the runs: a high loss
    (ax,) = fig.axes
    pred = fit.predict(np.array([[1e15]]))[0]
    assert ax.get_ylim()[1] >= pred
    plt.close(fig)


def test_checkpoints_of_a_run_are_joined_and_the_prediction_label_sits_beside_its_bar(
        chinchilla_fit) -> None:
    """A trial: the checkpoints' grey points hid under the fitted ones and read as separate
    runs, and the predicted value sat on its error bar."""
    frame, fit = chinchilla_fit
    ckpt = frame.assign(run=[f"n{n:.0e}" for n in frame["N"]])  # 4 runs of 4 checkpoints
    ax = plot_fit(ckpt, ckpt, fit, predict_at=[1e24]).axes[0]
    grey = [ln for ln in ax.get_lines() if ln.get_color() == "0.6"]
    assert len(grey) == 4
    for line, (_, run) in zip(grey, ckpt.groupby("run", sort=False), strict=True):
        np.testing.assert_allclose(line.get_xdata(), np.sort(6 * run["N"] * run["D"]))
    assert any("a line per run" in t.get_text() for t in ax.get_legend().get_texts())
    (label,) = [t for t in ax.texts if t.get_color() == "tab:orange"]
    assert label.get_ha() == "right" and label.get_va() == "center"
    assert not [ln for ln in plot_fit(frame, frame, fit).axes[0].get_lines()
                if ln.get_color() == "0.6"]  # one point per run: nothing to join
