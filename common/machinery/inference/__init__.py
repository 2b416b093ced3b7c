"""A trained model used: the newest model and its run's settings for predict.py, the ONNX file for export.py."""
