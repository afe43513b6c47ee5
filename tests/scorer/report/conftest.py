from tests.support.s3 import s3, s3_server  # noqa: F401 - fixtures (test_report_storage.py)
