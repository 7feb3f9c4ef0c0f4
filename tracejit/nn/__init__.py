"""`tj.nn`: modules, parameters, layers and losses (PyTorch's names and semantics)."""
from . import functional, init, parallel, utils
from .activation import (CELU, ELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                         LogSigmoid, Mish, PReLU, ReLU6, RReLU, SELU, Softplus, Softshrink,
                         Softsign, Tanhshrink, Threshold)
from .layers import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d,
                     AvgPool2d, AvgPool3d, BatchNorm1d, BatchNorm2d, BCELoss,
                     BCEWithLogitsLoss, CircularPad2d, ConstantPad1d, ConstantPad2d, Conv1d,
                     Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
                     CrossEntropyLoss, Dropout, Dropout2d, Embedding, Flatten, Fold, GELU,
                     Identity, LayerNorm, LeakyReLU, Linear, MaxPool1d, MaxPool2d, MaxPool3d,
                     MaxUnpool2d, ModuleDict, ModuleList, MSELoss, NLLLoss, PixelShuffle,
                     PixelUnshuffle, ReflectionPad1d, ReflectionPad2d, ReLU, ReplicationPad1d,
                     ReplicationPad2d, Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax,
                     Softmax2d, Tanh, Unflatten, Unfold, Upsample, UpsamplingBilinear2d,
                     UpsamplingNearest2d, ZeroPad2d)
from .dropout import AlphaDropout, Dropout1d, Dropout3d, FeatureAlphaDropout
from .dropout import MODULES as _DROPOUT_MODULES
from .linear import Bilinear
from .losses import (CosineEmbeddingLoss, CosineSimilarity, GaussianNLLLoss,
                     HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss,
                     MultiLabelSoftMarginLoss, MultiMarginLoss, PairwiseDistance,
                     PoissonNLLLoss, SoftMarginLoss, TripletMarginLoss)
from .losses import MODULES as _LOSS_MODULES
from .module import Module
from .normalization import (GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
                            LocalResponseNorm, RMSNorm)
from .normalization import MODULES as _NORM_MODULES
from .parallel import DataParallel
from .sparse import EmbeddingBag
from .parameter import Parameter
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell
from .transformer import (MultiheadAttention, Transformer, TransformerDecoder,
                          TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)

__all__ = ["functional", "init", "utils", "parallel", "BatchNorm1d", "BatchNorm2d", "Module",
           "Parameter", "Linear", "ReLU", "LeakyReLU", "SiLU", "Tanh", "Sigmoid", "GELU",
           "Softmax", "Dropout", "Dropout2d", "Embedding", "LayerNorm", "Sequential",
           "ModuleList", "ModuleDict", "MSELoss", "CrossEntropyLoss", "NLLLoss", "BCELoss",
           "BCEWithLogitsLoss", "SmoothL1Loss", "PixelShuffle", "PixelUnshuffle", "RNN",
           "RNNCell", "LSTM", "LSTMCell", "GRU", "GRUCell", "Conv1d", "Conv2d", "Conv3d",
           "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "MaxPool1d", "MaxPool2d",
           "MaxPool3d", "MaxUnpool2d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "ConstantPad1d",
           "ConstantPad2d", "ZeroPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "ReplicationPad1d", "ReplicationPad2d", "CircularPad2d", "Upsample",
           "UpsamplingNearest2d", "UpsamplingBilinear2d", "Unfold", "Fold", "Flatten",
           "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerEncoderLayer",
           "TransformerDecoder", "TransformerDecoderLayer", "Identity",
           "Bilinear", "EmbeddingBag", "Unflatten", "Softmax2d", "DataParallel"] + \
    _LOSS_MODULES + _NORM_MODULES + _DROPOUT_MODULES
__all__ += ["ELU", "SELU", "CELU", "Hardtanh", "ReLU6", "Hardswish", "Hardsigmoid", "Softplus",
            "Softsign", "Mish", "LogSigmoid", "PReLU", "GLU", "Tanhshrink", "Softshrink",
            "Hardshrink", "Threshold", "RReLU"]
