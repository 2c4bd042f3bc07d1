"""The one Kubernetes kit under every controller-like loop: API client, informer, work queue, kinds.

- :mod:`kubetrain.kube.client`: the async REST client (kubeconfig auth with renewal, retries
  left to callers, watch decoding, server-side apply with an explicit patch type);
- :mod:`kubetrain.kube.informer`: list + watch + a cache, resuming its watch and relisting on 410;
- :mod:`kubetrain.kube.workqueue`: the rate-limited, de-duplicating work queue;
- :mod:`kubetrain.kube.loop`: informers then workers over a queue until stopped, and how a
  failed reconcile is logged;
- :mod:`kubetrain.kube.eventloop`: the event loop of a process that lives on network traffic
  (uvloop where installed);
- :mod:`kubetrain.kube.kinds`: the kinds controllers read and write, with their REST names.

It sits just above :mod:`kubetrain.api` and beside the pure :mod:`kubetrain.runtime`: the TrainJob
controller and the local engine's loops use it; it knows nothing about TrainJobs' rules.
"""
