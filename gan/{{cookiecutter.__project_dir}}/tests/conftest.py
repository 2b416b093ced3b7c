{% include "pytest/conftest.py" %}
