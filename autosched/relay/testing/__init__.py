"""TVM's ``relay.testing``: networks written in relay with random weights, for benchmarks, tutorials and tests
that need a whole model without a file: ``resnet``, ``mobilenet``, ``vgg``, ``squeezenet``, ``inception_v3``,
``densenet``, ``resnet_3d`` (video) and ``mlp`` (input ``data``, output the class probabilities), ``dqn`` (Q
values), ``dcgan`` (a generator: noise to image) and ``lstm`` (an unrolled LSTM), each with
``get_workload(...) -> (mod, params)`` under TVM's argument names, and ``create_workload(net)``, which gives any
relay function random parameters the same way."""

from autosched.relay.testing import (
    dcgan,
    densenet,
    dqn,
    inception_v3,
    init,
    layers,
    lstm,
    mlp,
    mobilenet,
    resnet,
    resnet_3d,
    squeezenet,
    vgg,
)
from autosched.relay.testing.init import create_workload

__all__ = ["create_workload", "dcgan", "densenet", "dqn", "inception_v3", "init", "layers", "lstm", "mlp",
           "mobilenet", "resnet", "resnet_3d", "squeezenet", "vgg"]
