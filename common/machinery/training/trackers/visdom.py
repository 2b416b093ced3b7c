"""The experiment tracker: Visdom (a running server: `python -m visdom.server`, or VISDOM_SERVER_URL, VISDOM_PORT)."""

import html
from pathlib import Path
from typing import Any

import yaml
from ignite.engine import Engine
from ignite.handlers.visdom_logger import VisdomLogger

from machinery.settings import RunSettings, as_dict


class PersistentVisdomLogger(VisdomLogger):
    """A VisdomLogger whose plots outlast it: ``close()`` leaves them on the server, saved with their last points, and a
    continued run (preemption.py) plots on in the windows its stopped part drew.

    ignite 0.5.5's ``close()`` closes every window of the environment, last saved while the final updates could still be
    on their way; its handlers open each plot in a new window with a random id: here it is named after the plot's title.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._draw_line = self.vis.line
        self.vis.line = self._line_in_named_window

    def _line_in_named_window(self, win: str | None = None, update: str | None = None, **kwargs: Any) -> str:
        if win is None:  # a plot's first point: Visdom's "append" creates the window if it does not exist
            win, update = kwargs["opts"]["title"], "append"
        return self._draw_line(win=win, update=update, **kwargs)

    def close(self) -> None:
        self.executor.shutdown()  # waits for the plot updates still being sent
        self.vis.save([self.vis.env])


def open_tracker(engine: Engine, config: RunSettings, run_dir: Path) -> PersistentVisdomLogger:
    """The run's Visdom environment, named after its directory, the config in a window: a continued run plots on."""
    # Needs a running server: `python -m visdom.server`, or VISDOM_SERVER_URL and VISDOM_PORT. A continued
    # run (preemption.py) plots on in the same environment's windows.
    tracker = PersistentVisdomLogger(env=run_dir.name)
    config_text = html.escape(yaml.safe_dump(as_dict(config), sort_keys=False))
    tracker.vis.text(f"<pre>{config_text}</pre>", win="config", opts={"title": "config"})
    return tracker
