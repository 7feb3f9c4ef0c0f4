"""`tj.nn`: modules, parameters, layers and losses (PyTorch's names and semantics)."""
from . import functional, init, parallel, utils
from .layers import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss,
                     BCEWithLogitsLoss, Conv1d, Conv2d, CrossEntropyLoss, Dropout, Dropout2d,
                     Embedding, Flatten, GELU, Identity, LayerNorm, LeakyReLU, Linear, MaxPool2d,
                     ModuleDict, ModuleList, MSELoss, NLLLoss, PixelShuffle, PixelUnshuffle,
                     ReLU, Sequential, Sigmoid, SiLU, SmoothL1Loss, Softmax, Softmax2d, Tanh,
                     Unflatten)
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
           "RNNCell", "LSTM", "LSTMCell", "GRU", "GRUCell", "Conv1d", "Conv2d", "MaxPool2d",
           "AvgPool2d", "AdaptiveAvgPool2d", "Flatten", "MultiheadAttention", "Transformer",
           "TransformerEncoder", "TransformerEncoderLayer", "TransformerDecoder",
           "TransformerDecoderLayer", "Identity", "Bilinear", "EmbeddingBag", "Unflatten",
           "Softmax2d", "DataParallel"] + _LOSS_MODULES + _NORM_MODULES + _DROPOUT_MODULES
