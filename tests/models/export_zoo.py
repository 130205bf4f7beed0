#!/usr/bin/python3
"""Exports the model zoo Kiln is measured against, with PyTorch's outputs.

Run with Debian's /usr/bin/python3 (python3-torch 1.13, python3-torchvision 0.14):
    /usr/bin/python3 tests/models/export_zoo.py OUT_DIR [NAME...]
Each model becomes OUT_DIR/NAME/{model.onnx, test_data_set_0/{input_N,output_N}.pb}
(ONNX's own test layout, so `kiln onnx-test --model-tolerance` runs it).
Models are built with weights=None and a fixed seed (nothing is downloaded),
exported with static shapes at opset 14, 17 where LayerNorm should become
LayerNormalization, 13 for the quantised CNN, with small inputs where a model
allows them (64x64 images, inception_v3's smallest 75x75, alexnet's 224x224
whose pooling is only exportable there). BatchNorm statistics are measured
on random batches first (calibrate_batch_norm), so outputs are not vanishingly
small; vit_small's zero-initialised head is drawn at random for the same reason.
Two models are not a plain export:
  fp16_mlp: PyTorch 1.13 has no Half Linear on CPU, so the MLP is exported in
        float32 and its ONNX graph rewritten to float16 (weights, input,
        output); the reference runs each layer in float32 on the float16
        weights and rounds its output to float16, as the float16 graph does.
  qdq_int8: static quantisation with the qnnpack engine (this PyTorch has no
        fbgemm), exported as QuantizeLinear/DequantizeLinear around float
        Conv and Gemm; the reference is the quantised PyTorch model's output.
  qdq_resnet18: torchvision's quantisable resnet18, quantised the same way;
        its reference is the fake-quant evaluation of the exported graph
        (fake_quant_reference: every op in float64, QuantizeLinear rounding
        half to even), and it declares one quantisation step of its output
        as its tolerance (a file `tolerance`). scripts/qdq_layer_diff.sh
        compares every quantised tensor of it with this reference.
"""
import copy
import os
import sys
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import onnx
import torch
import torchvision
from onnx import numpy_helper

IMAGE = (1, 3, 64, 64)


@dataclass
class Case:
    model: torch.nn.Module
    inputs: Tuple[torch.Tensor, ...]
    opset: int = 14
    # The outputs to check against; default: the model run on `inputs`.
    reference: Optional[Callable[[], Tuple[torch.Tensor, ...]]] = None
    # Applied to the exported ONNX model before it is saved.
    rewrite: Optional[Callable[[onnx.ModelProto], None]] = None
    # The inputs written as test data; default: `inputs`.
    feeds: Optional[Tuple[torch.Tensor, ...]] = None
    # The outputs to check against, from the exported graph (after rewrite).
    onnx_reference: Optional[Callable[[onnx.ModelProto, Tuple], Tuple]] = None
    # An absolute tolerance the case declares (written to NAME/tolerance).
    tolerance: Optional[Callable[[onnx.ModelProto], float]] = None
    # Dim 0 of every input and output exported as a symbolic "batch": the
    # server serves the inputs' batch as a shape of its own.
    dynamic_batch: bool = False


class OutOnly(torch.nn.Module):
    """A torchvision segmentation model's 'out' only (it returns a dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def image(size=IMAGE):
    return (torch.randn(*size),)


# --- torchvision CNNs and vision transformers -------------------------------

def resnet50():
    return Case(torchvision.models.resnet50(weights=None), image())


def mobilenet_v3_small():
    return Case(torchvision.models.mobilenet_v3_small(weights=None), image())


def regnet_y_400mf():
    return Case(torchvision.models.regnet_y_400mf(weights=None), image())


def convnext_tiny():
    return Case(torchvision.models.convnext_tiny(weights=None), image(), opset=17)


def googlenet():
    return Case(torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=False),
                image())


def against_float64(model, inputs, **kwargs):
    """A case checked against the model run in float64, within twice the
    distance of PyTorch's own float32 run from it (or the default tolerance,
    if larger): for a network deep enough that float32's rounding alone,
    in any summation order, moves its outputs past 1e-4 of their scale."""
    def exact():
        with torch.no_grad():
            return copy.deepcopy(model).double()(*(x.double() for x in inputs)).float()

    def twice_float32_error(_proto):
        with torch.no_grad():
            y32 = model(*inputs).double()
            y64 = copy.deepcopy(model).double()(*(x.double() for x in inputs))
        return 2 * (y32 - y64).abs().max().item()

    return Case(model, inputs, reference=exact, tolerance=twice_float32_error, **kwargs)


def inception_v3():
    # 94 convs deep: PyTorch's float32 output is 1.7e-4 from its float64
    # one (max |logit| 1.7), past the default tolerance by itself.
    model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False)
    return against_float64(model, image((1, 3, 75, 75)))


def alexnet():
    # Below 224x224 its AdaptiveAvgPool2d(6) does not divide and has no ONNX form.
    return Case(torchvision.models.alexnet(weights=None), image((1, 3, 224, 224)))


def swin_t():
    return Case(torchvision.models.swin_t(weights=None), image(), opset=17)


def vit_small():
    model = torchvision.models.VisionTransformer(image_size=64, patch_size=16, num_layers=4,
                                                 num_heads=4, hidden_dim=128, mlp_dim=512,
                                                 num_classes=1000)
    torch.nn.init.normal_(model.heads.head.weight, std=0.1)  # torchvision zeroes it
    return Case(model, image(), opset=17)


def fcn_resnet50():
    model = torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None)
    return against_float64(OutOnly(model), image())


def deeplabv3_mobilenet_v3_large():
    model = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None)
    return Case(OutOnly(model), image())


def lraspp_mobilenet_v3_large():
    model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None)
    return Case(OutOnly(model), image())


# --- hand-written models -----------------------------------------------------

def conv_block(cin, cout):
    return torch.nn.Sequential(
        torch.nn.Conv2d(cin, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU(),
        torch.nn.Conv2d(cout, cout, 3, padding=1), torch.nn.BatchNorm2d(cout), torch.nn.ReLU())


class UNet(torch.nn.Module):
    """Two levels down, two up: one up by ConvTranspose2d, one by bilinear Upsample."""

    def __init__(self, cin=3, classes=2, width=16):
        super().__init__()
        self.enc0 = conv_block(cin, width)
        self.enc1 = conv_block(width, 2 * width)
        self.mid = conv_block(2 * width, 4 * width)
        self.pool = torch.nn.MaxPool2d(2)
        self.up1 = torch.nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec1 = conv_block(4 * width, 2 * width)
        self.up0 = torch.nn.Sequential(
            torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
            torch.nn.Conv2d(2 * width, width, 1))
        self.dec0 = conv_block(2 * width, width)
        self.head = torch.nn.Conv2d(width, classes, 1)

    def forward(self, x):
        e0 = self.enc0(x)
        e1 = self.enc1(self.pool(e0))
        m = self.mid(self.pool(e1))
        d1 = self.dec1(torch.cat([self.up1(m), e1], 1))
        d0 = self.dec0(torch.cat([self.up0(d1), e0], 1))
        return self.head(d0)


def unet():
    return Case(UNet(), image())


class Recurrent(torch.nn.Module):
    """A 2-layer bidirectional batch-first LSTM or GRU and a per-step classifier."""

    def __init__(self, cell, features=32, hidden=64, classes=10):
        super().__init__()
        self.rnn = cell(features, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(2 * hidden, classes)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


def lstm():
    return Case(Recurrent(torch.nn.LSTM), (torch.randn(2, 16, 32),))


def gru():
    return Case(Recurrent(torch.nn.GRU), (torch.randn(2, 16, 32),))


def audio_conv1d():
    layers = []
    channels = [1, 16, 32, 64]
    for cin, cout in zip(channels, channels[1:]):
        layers += [torch.nn.Conv1d(cin, cout, 9, stride=2, padding=4), torch.nn.BatchNorm1d(cout),
                   torch.nn.ReLU(), torch.nn.MaxPool1d(2)]
    model = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool1d(1), torch.nn.Flatten(),
                                torch.nn.Linear(64, 12))
    return Case(model, (torch.randn(2, 1, 4000),))


def video_conv3d():
    """A small 3-D (video) CNN: strided, padded, dilated and grouped Conv3d,
    BatchNorm3d, both pools in 3-D, with and without counting the padding."""
    model = torch.nn.Sequential(
        torch.nn.Conv3d(3, 8, (3, 5, 5), stride=(1, 2, 2), padding=(1, 2, 2)),
        torch.nn.BatchNorm3d(8), torch.nn.ReLU(),
        torch.nn.MaxPool3d((3, 3, 3), stride=(2, 2, 2), padding=1),
        torch.nn.Conv3d(8, 16, 3, padding=2, dilation=2, groups=2), torch.nn.ReLU(),
        torch.nn.AvgPool3d((2, 3, 3), stride=(1, 2, 2), padding=(1, 1, 1),
                           count_include_pad=False),
        torch.nn.Conv3d(16, 16, 1), torch.nn.ReLU(),
        torch.nn.AvgPool3d(2, stride=1, padding=1, count_include_pad=True),
        torch.nn.AdaptiveAvgPool3d(1), torch.nn.Flatten(), torch.nn.Linear(16, 5))
    return Case(model, (torch.randn(1, 3, 8, 32, 32),))


class GridSampling(torch.nn.Module):
    """grid_sample in every mode, padding mode and corner alignment, on a
    grid that reaches past the image (a spatial-transformer-like warp)."""

    def forward(self, x, grid):
        outs = []
        for mode in ("bilinear", "nearest", "bicubic"):
            for padding in ("zeros", "border", "reflection"):
                for align in (False, True):
                    outs.append(torch.nn.functional.grid_sample(
                        x, grid, mode=mode, padding_mode=padding, align_corners=align))
        return torch.cat(outs, 1)


def grid_sampling():
    x = torch.randn(2, 3, 7, 9)
    grid = torch.rand(2, 5, 6, 2) * 2.8 - 1.4
    return Case(GridSampling(), (x, grid), opset=16)


class BertEncoder(torch.nn.Module):
    """Token and position embeddings, a TransformerEncoder skipping padded keys."""

    def __init__(self, vocab=1000, max_len=64, d_model=128, heads=4, layers=2):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, d_model)
        self.positions = torch.nn.Parameter(torch.randn(1, max_len, d_model) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model,
                                                 dropout=0.0, activation="gelu",
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(d_model)

    def forward(self, ids, padding):
        x = self.tokens(ids) + self.positions[:, :ids.shape[1]]
        return self.norm(self.encoder(x, src_key_padding_mask=padding))


def bert_encoder():
    ids = torch.randint(0, 1000, (2, 16))
    padding = torch.zeros(2, 16, dtype=torch.bool)
    padding[0, 12:] = True  # the first sequence has 12 tokens, the second 16
    return Case(BertEncoder(), (ids, padding), opset=17)


class CausalSelfAttention(torch.nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class GptBlock(torch.nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads)
        self.ln2 = torch.nn.LayerNorm(d_model)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d_model, 4 * d_model), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GptDecoder(torch.nn.Module):
    def __init__(self, vocab=1000, max_len=64, d_model=128, heads=4, layers=2):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, d_model)
        self.positions = torch.nn.Embedding(max_len, d_model)
        self.blocks = torch.nn.Sequential(*[GptBlock(d_model, heads) for _ in range(layers)])
        self.norm = torch.nn.LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, vocab, bias=False)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.tokens(ids) + self.positions(positions)
        return self.head(self.norm(self.blocks(x)))


def gpt_decoder():
    return Case(GptDecoder(), (torch.randint(0, 1000, (2, 16)),), opset=17)


def to_float16(model_proto):
    """Float tensors of a graph without Cast or Constant nodes to float16:
    weights, input, output."""
    graph = model_proto.graph
    for i, t in enumerate(graph.initializer):
        if t.data_type == onnx.TensorProto.FLOAT:
            half = numpy_helper.from_array(numpy_helper.to_array(t).astype("float16"), t.name)
            graph.initializer[i].CopyFrom(half)
    for v in list(graph.input) + list(graph.output):
        v.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    del graph.value_info[:]


def fp16_mlp():
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))
    model = model.half().float()  # weights rounded to float16, kept float32 to run on CPU
    x = torch.randn(4, 256).half()

    def reference():
        y = x
        for layer in model:  # each op's output is float16 in the rewritten graph
            y = layer(y.float()).half()
        return (y,)

    return Case(model, (x.float(),), reference=reference, rewrite=to_float16, feeds=(x,))


def fp16_cnn():
    """A float16 CNN (conv, BatchNorm folded by the export, ReLU, both pools,
    a residual add, Linear), rewritten to float16 as fp16_mlp is; the
    reference rounds every exported op's output to float16."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1),
                                            torch.nn.BatchNorm2d(16))
            self.body = torch.nn.Conv2d(16, 16, 3, padding=1)
            self.head = torch.nn.Linear(16, 10)
            self.rounded = lambda t: t  # the reference rounds to float16 here

        def forward(self, x):
            r = self.rounded
            h = torch.max_pool2d(r(torch.relu(self.stem(x))), 2)
            h = r(h + r(torch.relu(self.body(h))))
            h = r(torch.nn.functional.adaptive_avg_pool2d(h, 1))
            return r(self.head(torch.flatten(h, 1)))

    model = Net()
    calibrate_batch_norm(model, torch.randn(4, 3, 32, 32))
    model.eval()
    # Weights as float16 stores them, the BatchNorm folded first (as the
    # export folds it) so that their rounding falls where the graph's does.
    fused = torch.ao.quantization.fuse_modules(model, [["stem.0", "stem.1"]], inplace=False)
    fused = fused.half().float()
    x = torch.randn(2, 3, 32, 32).half()

    def reference():
        fused.rounded = lambda t: t.half().float()
        y = fused(x.float()).half()
        fused.rounded = lambda t: t
        return (y,)

    return Case(fused, (x.float(),), reference=reference, rewrite=to_float16, feeds=(x,))


class SmallQuantCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.fc = torch.nn.Linear(32 * 8 * 8, 10)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.features(self.quant(x))
        return self.dequant(self.fc(torch.flatten(x, 1)))


def qdq_int8():
    torch.backends.quantized.engine = "qnnpack"
    model = SmallQuantCnn().eval()
    model.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    torch.ao.quantization.fuse_modules(
        model, [["features.0", "features.1"], ["features.3", "features.4"]], inplace=True)
    torch.ao.quantization.prepare(model, inplace=True)
    with torch.no_grad():
        for _ in range(8):
            model(torch.randn(4, 3, 32, 32))
    torch.ao.quantization.convert(model, inplace=True)
    return Case(model, (torch.randn(1, 3, 32, 32),), opset=13)


def fake_quant_reference(proto, inputs):
    """The exported QDQ graph evaluated exactly, as a fake-quant model's
    arithmetic defines it: in float64 (every product and sum of the
    dequantised values exact to far below one quantisation step), quantising
    with round half to even and saturation; outputs as float32."""
    def wide(t):
        return t.double() if t.is_floating_point() else t

    values = {t.name: wide(torch.from_numpy(numpy_helper.to_array(t).copy()))
              for t in proto.graph.initializer}
    for i, x in zip(proto.graph.input, inputs):
        values[i.name] = wide(x)
    f = torch.nn.functional

    def attr(node, name, default=None):
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    onnx_to_torch = {1: torch.float32, 2: torch.uint8, 3: torch.int8, 6: torch.int32,
                     7: torch.int64, 9: torch.bool, 11: torch.float64}
    for node in proto.graph.node:
        x = [values[i] if i else None for i in node.input]
        op = node.op_type
        if op == "Constant":
            y = wide(torch.from_numpy(numpy_helper.to_array(attr(node, "value")).copy()))
        elif op == "QuantizeLinear":
            zp = x[2]
            low, high = (0, 255) if zp.dtype == torch.uint8 else (-128, 127)
            q = torch.round(x[0] / x[1].double()) + zp.double()
            y = torch.clamp(q, low, high).to(zp.dtype)
        elif op == "DequantizeLinear":
            y = (x[0].double() - x[2].double()) * x[1].double()
        elif op == "Cast":
            to = onnx_to_torch[attr(node, "to")]
            y = x[0].to(torch.float64 if to == torch.float32 else to)
        elif op == "ConstantOfShape":
            value = attr(node, "value")
            fill = numpy_helper.to_array(value) if value is not None else [0.0]
            y = torch.full(tuple(x[0].tolist()), float(fill[0]), dtype=torch.float64)
        elif op == "Conv":
            pads = attr(node, "pads", [0, 0, 0, 0])
            y = f.conv2d(f.pad(x[0], (pads[1], pads[3], pads[0], pads[2])), x[1], x[2],
                         stride=attr(node, "strides", [1, 1]),
                         dilation=attr(node, "dilations", [1, 1]), groups=attr(node, "group", 1))
        elif op == "Relu":
            y = torch.relu(x[0])
        elif op == "MaxPool":
            pads = attr(node, "pads", [0, 0, 0, 0])
            y = f.max_pool2d(f.pad(x[0], (pads[1], pads[3], pads[0], pads[2]),
                                   value=-float("inf")),
                             attr(node, "kernel_shape"), attr(node, "strides", [1, 1]))
        elif op == "Add":
            y = x[0] + x[1]
        elif op == "GlobalAveragePool":
            y = x[0].mean(dim=(2, 3), keepdim=True)
        elif op == "Flatten":
            y = torch.flatten(x[0], attr(node, "axis", 1))
        elif op == "Gemm":
            b = x[1].t() if attr(node, "transB", 0) else x[1]
            y = x[0] @ b + (x[2] if len(x) > 2 and x[2] is not None else 0)
        else:
            raise NotImplementedError(op)
        values[node.output[0]] = y
    return tuple(values[o.name].float() if values[o.name].is_floating_point() else values[o.name]
                 for o in proto.graph.output)


def output_step(proto):
    """The scale of the graph output's last DequantizeLinear: one step."""
    constants = {n.output[0]: numpy_helper.to_array(n.attribute[0].t)
                 for n in proto.graph.node if n.op_type == "Constant"}
    constants.update({t.name: numpy_helper.to_array(t) for t in proto.graph.initializer})
    last = [n for n in proto.graph.node if n.op_type == "DequantizeLinear"][-1]
    return float(constants[last.input[1]])


def qdq_resnet18():
    torch.backends.quantized.engine = "qnnpack"
    model = torchvision.models.quantization.resnet18(weights=None, quantize=False).eval()
    model.fuse_model()
    model.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    torch.ao.quantization.prepare(model, inplace=True)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(4, 3, 112, 112))
    torch.ao.quantization.convert(model, inplace=True)
    return Case(model, (torch.randn(1, 3, 112, 112),), opset=13,
                onnx_reference=fake_quant_reference, tolerance=output_step)


def mobilenet_v3_small_b8():
    """A batch one image of which fits in L2 and 8 do not (its first
    activation is 800 KB an image): the server runs it as 8 slices
    (engine/row_chunks.h)."""
    return Case(torchvision.models.mobilenet_v3_small(weights=None),
                (torch.randn(8, 3, 224, 224),), dynamic_batch=True)


def bert_encoder_b16():
    """bert_encoder's layers at d_model 256 and 64 tokens, batch 16: one
    sequence's feed-forward activation (256 KB) fits in L2, 16 do not. PyTorch
    moves the batch to dim 1 inside attention and merges it with the tokens."""
    ids = torch.randint(0, 1000, (16, 64))
    padding = torch.zeros(16, 64, dtype=torch.bool)
    padding[0, 40:] = True
    padding[5, 10:] = True
    return Case(BertEncoder(max_len=64, d_model=256), (ids, padding), opset=17,
                dynamic_batch=True)


def mobilenet_v3_small_fixed_b8():
    """mobilenet_v3_small_b8 exported with its batch of 8 baked in: the
    server runs it as slices of its graph at one row (GraphAtRows)."""
    return Case(torchvision.models.mobilenet_v3_small(weights=None),
                (torch.randn(8, 3, 224, 224),))


def bert_encoder_fixed_b16():
    """bert_encoder_b16 with its batch baked in: the reshapes that split the
    heads name 16 sequences, which the slices' graph must name as 1."""
    ids = torch.randint(0, 1000, (16, 64))
    padding = torch.zeros(16, 64, dtype=torch.bool)
    padding[3, 20:] = True
    return Case(BertEncoder(max_len=64, d_model=256), (ids, padding), opset=17)


MODELS = {f.__name__: f for f in [
    resnet50, mobilenet_v3_small, regnet_y_400mf, convnext_tiny, googlenet, inception_v3,
    alexnet, swin_t, vit_small, fcn_resnet50, deeplabv3_mobilenet_v3_large,
    lraspp_mobilenet_v3_large, unet, lstm, gru, audio_conv1d, video_conv3d, grid_sampling,
    bert_encoder, gpt_decoder, fp16_mlp, fp16_cnn, qdq_int8, qdq_resnet18,
    mobilenet_v3_small_b8, bert_encoder_b16, mobilenet_v3_small_fixed_b8,
    bert_encoder_fixed_b16]}


def calibrate_batch_norm(model, x):
    """BatchNorm running statistics measured on random batches shaped like x.

    With its initial statistics (mean 0, variance 1) a random network's
    signal shrinks or grows layer by layer (mobilenet_v3_small ends near
    1e-10), and an output that small passes any comparison.
    """
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the batches
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(4, *x.shape[1:]))
    model.eval()


def write_tensor(path, value):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(value.detach().numpy()).SerializeToString())


def export(name, out_dir):
    torch.manual_seed(0)
    case = MODELS[name]()
    calibrate_batch_norm(case.model, case.inputs[0])
    case.model.eval()
    case_dir = os.path.join(out_dir, name)
    data = os.path.join(case_dir, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(case_dir, "model.onnx")
    # Exported and run with autograd on: PyTorch's fused inference fast path
    # (which has no ONNX form) only runs when no parameter needs a gradient,
    # so the reference takes the path the export traced.
    outputs = case.reference() if case.reference else case.model(*case.inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    input_names = ["input_%d" % i for i in range(len(case.inputs))]
    output_names = ["output_%d" % i for i in range(len(outputs))]
    dynamic_axes = ({n: {0: "batch"} for n in input_names + output_names}
                    if case.dynamic_batch else None)
    torch.onnx.export(case.model, case.inputs, path, opset_version=case.opset,
                      input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes)
    if case.rewrite:
        proto = onnx.load(path)
        case.rewrite(proto)
        onnx.checker.check_model(proto)
        onnx.save(proto, path)
    if case.onnx_reference:
        with torch.no_grad():
            outputs = case.onnx_reference(onnx.load(path), case.inputs)
    if case.tolerance:
        with open(os.path.join(case_dir, "tolerance"), "w") as f:
            f.write("%r\n" % case.tolerance(onnx.load(path)))
    for i, x in enumerate(case.feeds or case.inputs):
        write_tensor(os.path.join(data, "input_%d.pb" % i), x)
    for i, y in enumerate(outputs):
        write_tensor(os.path.join(data, "output_%d.pb" % i), y)


if __name__ == "__main__":
    out = sys.argv[1]
    for name in sys.argv[2:] or list(MODELS):
        export(name, out)
        print("exported", name)
