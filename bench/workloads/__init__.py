"""The benchmark workloads, one module per framework (``bench/run.py`` drives them; see ``bench/README.md``)."""
