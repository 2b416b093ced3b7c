{#- main.py's import of utils: the helpers every template's run() uses, and those its answers add. -#}
from utils import (
    cli,
{% if flags.xla %}
    device_loaders,
{% endif %}
{% if flags.eval_metric %}
    log_metrics,
{% endif %}
    log_world,
    resume_from,
    setup_handlers,
    setup_logging,
    setup_run_dir,
{% if cookiecutter.logger != "none" %}
    setup_tracking,
{% endif %}
{% if flags.xla %}
    setup_xla_metrics,
{% endif %}
)
