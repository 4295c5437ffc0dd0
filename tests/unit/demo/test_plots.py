"""The report's plots: each drawn into its own file, and a figure whose drawing fails is
closed and not counted as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantq.demo.plots import PlotFolder, write_plots
from unit.demo.test_demo_report import demo_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_a_demo_run_gets_its_three_plots(tmp_path: Path) -> None:
    written, note = write_plots(demo_run(20, rows_for=20), tmp_path)
    assert written == ["throughput.png", "latency.png", "partition_lag.png"]
    assert note == ""
    for name in written:
        assert (tmp_path / name).read_bytes().startswith(PNG_SIGNATURE)


def test_a_failed_drawing_is_closed_and_not_written(tmp_path: Path) -> None:
    plots = PlotFolder.open(tmp_path)
    assert plots is not None
    import matplotlib.pyplot as pyplot

    def broken(figure: object) -> None:
        raise ValueError("no data")

    with pytest.raises(ValueError, match="no data"):
        plots.save("broken.png", broken)
    plots.save("fine.png", lambda figure: figure.subplots().plot([0, 1], [1, 0]))
    assert plots.written == ["fine.png"]
    assert not (tmp_path / "broken.png").exists()
    assert pyplot.get_fignums() == []
