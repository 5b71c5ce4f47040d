"""TVM's ``relay.testing``: networks written in relay with random weights, for benchmarks, tutorials and tests
that need a whole model without a file: ``resnet``, ``mobilenet``, ``vgg`` and ``mlp``, each with
``get_workload(batch_size, ...) -> (mod, params)`` (input ``data``, output the class probabilities), and
``create_workload(net)``, which gives any relay function random parameters the same way."""

from autosched.relay.testing import init, layers, mlp, mobilenet, resnet, vgg
from autosched.relay.testing.init import create_workload

__all__ = ["create_workload", "init", "layers", "mlp", "mobilenet", "resnet", "vgg"]
