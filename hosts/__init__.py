"""End hosts: each system's host side in its own package (``netreduce/``, ``atp/``,
``ask/``, ``serene/``, ``kv/``, ``consensus/``) over one shared ``transport/``, and the
workloads that drive any of them (``vector_job``, ``train``, ``scheduled_job``, ``mlp``).
Hosts reach the controller only through its API client (``controller/api_client.py``)."""
