{% include "pytest/test_xla.py" %}
