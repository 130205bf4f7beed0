#!/usr/bin/python3
"""A transformer's MLP blocks, float32 and statically quantised (QDQ), as ONNX.

    /usr/bin/python3 bench/qdq_mlp.py OUT_DIR [--layers L] [--seq S]

Writes OUT_DIR/{fp32_mlp,qdq_mlp,dynamic_mlp}/model.onnx: L blocks (default
4) of BERT-base's feed-forward layer on x (1, S, 768), S = 128:
    x = x + (relu(x W1 + b1) W2 + b2)     W1 (768, 3072), W2 (3072, 768)
The QDQ file is quantised here, without onnxruntime.quantization (Debian has
none): each MatMul's activation through QuantizeLinear/DequantizeLinear,
uint8 with a scale and zero point from its range on calibration inputs
(uniform in [-0.5, 0.5), what kiln-bench and bench/ort_bench.js feed), and
its weight stored int8, symmetric per output column, behind a
DequantizeLinear (axis 1). That is the layout ONNX Runtime's static
quantiser writes for MatMul (QDQ format, per-channel weights). Each
directory also holds test_data_set_0 with the graph's output in float64
arithmetic (the QDQ one quantising exactly) for `kiln onnx-test
--model-tolerance`. A float32 run differs from it where a rounding lands a
value on the other side of a quantisation boundary, and that flip carries
on through the later blocks: the QDQ directory declares one step of its last
activation quantiser as its tolerance (a float32 NumPy run of the graph is
0.0108 off at most, that step 0.0125), dynamic_mlp the largest step its
DynamicQuantizeLinears take on the test input.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN, FFN = 768, 3072


def quant_params(values):
    """uint8 scale and zero point covering values' range and 0."""
    low, high = min(float(values.min()), 0.0), max(float(values.max()), 0.0)
    scale = np.float32((high - low) / 255 or 1.0)
    zero = np.uint8(np.clip(np.round(-low / scale), 0, 255))
    return scale, zero


def quantise(x, scale, zero):
    return np.clip(np.round(x / np.float64(scale)) + float(zero), 0, 255)


def build(layers, seq, seed=0):
    rng = np.random.default_rng(seed)
    weights = []
    for _ in range(layers):
        w1 = rng.normal(0, 0.02, (HIDDEN, FFN)).astype(np.float32)
        b1 = rng.normal(0, 0.02, FFN).astype(np.float32)
        w2 = rng.normal(0, 0.02, (FFN, HIDDEN)).astype(np.float32)
        b2 = rng.normal(0, 0.02, HIDDEN).astype(np.float32)
        weights.append((w1, b1, w2, b2))
    # Weights as int8 per column; the float model uses their dequantised values.
    qweights = []
    for w1, b1, w2, b2 in weights:
        q = []
        for w in (w1, w2):
            s = (np.abs(w).max(axis=0) / 127).astype(np.float32)
            q.append((np.clip(np.round(w / s), -127, 127).astype(np.int8), s))
        qweights.append((q[0], b1, q[1], b2))
    deq = [(q1.astype(np.float32) * s1, b1, q2.astype(np.float32) * s2, b2)
           for (q1, s1), b1, (q2, s2), b2 in qweights]
    # Calibration on the float model.
    x = rng.uniform(-0.5, 0.5, (8, seq, HIDDEN)).astype(np.float32)
    params = []
    for w1, b1, w2, b2 in deq:
        px = quant_params(x)
        h = np.maximum(x @ w1 + b1, 0)
        ph = quant_params(h)
        params.append((px, ph))
        x = x + (h @ w2 + b2)

    def graph(mode):
        quantised = mode == "qdq"
        nodes, inits = [], []
        name = "x"
        for i, (((q1, s1), b1, (q2, s2), b2), (px, ph)) in enumerate(zip(qweights, params)):
            def const(n, v):
                inits.append(numpy_helper.from_array(np.asarray(v), f"l{i}_{n}"))
                return f"l{i}_{n}"

            def activation(src, p, tag):
                if not quantised:
                    return src
                s, z = const(f"{tag}_scale", p[0]), const(f"{tag}_zero", p[1])
                nodes.append(helper.make_node("QuantizeLinear", [src, s, z], [f"l{i}_{tag}_q"]))
                nodes.append(helper.make_node("DequantizeLinear", [f"l{i}_{tag}_q", s, z],
                                              [f"l{i}_{tag}_dq"]))
                return f"l{i}_{tag}_dq"

            def weight(q, s, tag):
                if not quantised:
                    return const(tag, q.astype(np.float32) * s)
                args = [const(f"{tag}_q", q), const(f"{tag}_scale", s),
                        const(f"{tag}_zero", np.zeros(s.shape, np.int8))]
                nodes.append(helper.make_node("DequantizeLinear", args, [f"l{i}_{tag}_dq"], axis=1))
                return f"l{i}_{tag}_dq"

            def dynamic_matmul(src, q, s, tag):
                out = f"l{i}_{tag}"
                nodes.append(helper.make_node("DynamicQuantizeLinear", [src],
                                              [f"{out}_q", f"{out}_s", f"{out}_z"]))
                nodes.append(helper.make_node("MatMulInteger",
                                              [f"{out}_q", const(f"{tag}_w", q), f"{out}_z"],
                                              [f"{out}_acc"]))
                nodes.append(helper.make_node("Cast", [f"{out}_acc"], [f"{out}_accf"],
                                              to=TensorProto.FLOAT))
                nodes.append(helper.make_node("Mul", [f"{out}_s", const(f"{tag}_ws", s)],
                                              [f"{out}_scale"]))
                nodes.append(helper.make_node("Mul", [f"{out}_accf", f"{out}_scale"], [out]))
                return out

            if mode == "dynamic":
                nodes.append(helper.make_node("Identity", [dynamic_matmul(name, q1, s1, "p1")],
                                              [f"l{i}_mm1"]))
            else:
                a = activation(name, px, "x")
                nodes.append(helper.make_node("MatMul", [a, weight(q1, s1, "w1")], [f"l{i}_mm1"]))
            nodes.append(helper.make_node("Add", [f"l{i}_mm1", const("b1", b1)], [f"l{i}_fc1"]))
            nodes.append(helper.make_node("Relu", [f"l{i}_fc1"], [f"l{i}_h"]))
            if mode == "dynamic":
                nodes.append(helper.make_node(
                    "Identity", [dynamic_matmul(f"l{i}_h", q2, s2, "p2")], [f"l{i}_mm2"]))
            else:
                h = activation(f"l{i}_h", ph, "h")
                nodes.append(helper.make_node("MatMul", [h, weight(q2, s2, "w2")], [f"l{i}_mm2"]))
            nodes.append(helper.make_node("Add", [f"l{i}_mm2", const("b2", b2)], [f"l{i}_fc2"]))
            out = "y" if i == layers - 1 else f"l{i}_out"
            nodes.append(helper.make_node("Add", [name, f"l{i}_fc2"], [out]))
            name = out
        g = helper.make_graph(
            nodes, f"{mode}_mlp",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, HIDDEN])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, HIDDEN])], inits)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(model)
        return model

    def reference(x, mode):
        """The graph's arithmetic in float64, quantising exactly; and the
        largest dynamic quantisation step taken."""
        x = x.astype(np.float64)
        steps = [0.0]

        def dynamic(a, q, s):
            low, high = min(a.min(), 0.0), max(a.max(), 0.0)
            scale = (high - low) / 255
            zero = np.clip(np.round(-low / scale), 0, 255)
            steps.append(scale)
            acc = (np.clip(np.round(a / scale) + zero, 0, 255) - zero) @ q.astype(np.float64)
            return acc * (scale * s.astype(np.float64))

        for ((q1, s1), b1, (q2, s2), b2), (px, ph) in zip(qweights, params):
            if mode == "dynamic":
                h = np.maximum(dynamic(x, q1, s1) + b1, 0)
                x = x + (dynamic(h, q2, s2) + b2)
                continue
            a = x
            if mode == "qdq":
                a = (quantise(x, *px) - float(px[1])) * np.float64(px[0])
            h = np.maximum(a @ (q1 * s1.astype(np.float64)) + b1, 0)
            if mode == "qdq":
                h = (quantise(h, *ph) - float(ph[1])) * np.float64(ph[0])
            x = x + (h @ (q2 * s2.astype(np.float64)) + b2)
        tolerance = float(params[-1][0][0]) if mode == "qdq" else max(steps)
        return x.astype(np.float32), tolerance

    return graph, reference


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    args = parser.parse_args()
    graph, reference = build(args.layers, args.seq)
    x = np.random.default_rng(1).uniform(-0.5, 0.5, (1, args.seq, HIDDEN)).astype(np.float32)
    for mode in ("fp32", "qdq", "dynamic"):
        d = os.path.join(args.out, f"{mode}_mlp")
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        onnx.save(graph(mode), os.path.join(d, "model.onnx"))
        y, tolerance = reference(x, mode)
        for kind, value in (("input", x), ("output", y)):
            tensor = numpy_helper.from_array(value, "x" if kind == "input" else "y")
            with open(os.path.join(d, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
                f.write(tensor.SerializeToString())
        if mode != "fp32":
            with open(os.path.join(d, "tolerance"), "w") as f:
                f.write("%r\n" % tolerance)


if __name__ == "__main__":
    main()
