"""Work out which BertModel parameter each initializer of a BERT encoder's ONNX graph is,
and the ``BertConfig`` it implies, by walking the graph.

Why: the exporter stored every MatMul weight as [in, out] under a meaningless name
(``onnx::MatMul_1525``), so a trainable model can only be recovered from the graph's
structure, never from its names (``recover_onnx_bert.py`` is the script that does the
recovery; this module is the part that changes when exporters change their graphs). Each
initializer's role is read off the nodes it feeds: the Gathers of the embeddings (which
graph input indexes them), the LayerNorm chain (decomposed or fused) that cuts the encoder
into blocks, and, inside an attention block, which side of the score and context MatMuls a
projection reaches (query, key, value) or whether it reads the context (output dense). The
mapping is strict: every parameter assigned exactly once, every initializer used or
reported. Needs only numpy and onnx, not torch.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import numpy_helper

__all__ = [
    "FloatArray",
    "Graph",
    "LayerNorm",
    "Linear",
    "Mapper",
    "Recovered",
    "find_layer_norms",
    "find_linears",
    "recover",
]

FloatArray = NDArray[np.float32]


# ------------------------------------------------------------------------------- graph


@dataclass(frozen=True)
class LayerNorm:
    """A LayerNorm found in the graph: its input, output, weights and epsilon."""

    x: str
    out: str
    gamma: str
    beta: str
    eps: float
    position: int  # index of the node writing ``out``


@dataclass(frozen=True)
class Linear:
    """x @ W + b with W an [in, out] initializer (MatMul + Add, or Gemm)."""

    x: str
    out: str
    weight: str
    bias: str | None
    transposed: bool  # stored as [out, in] already (Gemm transB=1)


@dataclass
class Graph:
    """An ONNX graph indexed for walking: producers, consumers and constant values."""

    model: onnx.ModelProto
    inits: dict[str, NDArray[Any]] = field(default_factory=dict)
    consts: dict[str, NDArray[Any]] = field(default_factory=dict)
    producer: dict[str, int] = field(default_factory=dict)
    consumers: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        g = self.model.graph
        self.inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.consts = dict(self.inits)
        for i, node in enumerate(g.node):
            for out in node.output:
                self.producer[out] = i
            for name in node.input:
                self.consumers.setdefault(name, []).append(i)
            if node.op_type == "Constant" and node.attribute[0].name == "value":
                self.consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)

    @property
    def nodes(self) -> Sequence[onnx.NodeProto]:
        nodes: Sequence[onnx.NodeProto] = self.model.graph.node
        return nodes

    def node_of(self, tensor: str) -> onnx.NodeProto | None:
        i = self.producer.get(tensor)
        return None if i is None else self.nodes[i]

    def users(self, tensor: str, op: str | None = None) -> list[onnx.NodeProto]:
        found = [self.nodes[i] for i in self.consumers.get(tensor, [])]
        return [n for n in found if op is None or n.op_type == op]

    def weight(self, name: str, ndim: int) -> bool:
        """Whether ``name`` is a float initializer of ``ndim`` dimensions."""
        a = self.inits.get(name)
        return a is not None and a.ndim == ndim and a.dtype.kind == "f"

    def scalar(self, name: str) -> float | None:
        a = self.consts.get(name)
        return float(a.reshape(-1)[0]) if a is not None and a.size == 1 else None

    def upstream(self, tensor: str, stop: set[str]) -> set[str]:
        """Every tensor ``tensor`` is computed from, not walking past those in ``stop``."""
        seen, todo = {tensor}, deque([tensor])
        while todo:
            t = todo.popleft()
            node = self.node_of(t)
            if node is None or (t in stop and t != tensor):
                continue
            for name in node.input:
                if name and name not in seen:
                    seen.add(name)
                    todo.append(name)
        return seen

    def downstream_nodes(self, tensor: str) -> Iterable[onnx.NodeProto]:
        """Nodes reached forward from ``tensor``, nearest first."""
        seen, todo = {tensor}, deque([tensor])
        while todo:
            for node in self.users(todo.popleft()):
                yield node
                for out in node.output:
                    if out not in seen:
                        seen.add(out)
                        todo.append(out)


def find_layer_norms(g: Graph) -> list[LayerNorm]:
    """LayerNormalization nodes, or the exporter's decomposition ending in Div * gamma + beta
    (x - mean) / sqrt(var + eps), in graph order."""
    found: list[LayerNorm] = []
    for i, node in enumerate(g.nodes):
        if node.op_type == "LayerNormalization" and len(node.input) == 3:
            eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
            x, gamma, beta = node.input
            found.append(LayerNorm(x, node.output[0], gamma, beta, eps, i))
            continue
        if node.op_type != "Mul" or not any(g.weight(x, 1) for x in node.input):
            continue
        gamma = next(x for x in node.input if g.weight(x, 1))
        div = g.node_of(next(x for x in node.input if x != gamma))
        if div is None or div.op_type != "Div":
            continue
        sub, sqrt = g.node_of(div.input[0]), g.node_of(div.input[1])
        add_eps = g.node_of(sqrt.input[0]) if sqrt is not None and sqrt.op_type == "Sqrt" else None
        if sub is None or sub.op_type != "Sub" or add_eps is None or add_eps.op_type != "Add":
            continue
        eps_value = [v for v in (g.scalar(x) for x in add_eps.input) if v is not None]
        adds = [n for n in g.users(node.output[0], "Add") if any(g.weight(x, 1) for x in n.input)]
        if len(adds) != 1 or len(eps_value) != 1:
            continue
        beta = next(x for x in adds[0].input if g.weight(x, 1))
        position = g.producer[adds[0].output[0]]
        found.append(
            LayerNorm(sub.input[0], adds[0].output[0], gamma, beta, eps_value[0], position)
        )
    return sorted(found, key=lambda ln: ln.position)


def find_linears(g: Graph) -> list[Linear]:
    """Every MatMul (or Gemm) by a 2-D float initializer, with the bias Add after it."""
    found: list[Linear] = []
    for node in g.nodes:
        if node.op_type == "Gemm" and g.weight(node.input[1], 2):
            attrs = {a.name: a.i for a in node.attribute if a.name in ("transA", "transB")}
            if attrs.get("transA", 0):
                raise SystemExit(f"Gemm {node.name} with transA is not supported")
            bias = node.input[2] if len(node.input) > 2 and g.weight(node.input[2], 1) else None
            transposed = bool(attrs.get("transB", 0))
            found.append(Linear(node.input[0], node.output[0], node.input[1], bias, transposed))
        elif node.op_type == "MatMul" and g.weight(node.input[1], 2):
            out = node.output[0]
            adds = [n for n in g.users(out, "Add") if any(g.weight(x, 1) for x in n.input)]
            bias = next(x for x in adds[0].input if g.weight(x, 1)) if len(adds) == 1 else None
            if bias is not None:
                out = adds[0].output[0]
            found.append(Linear(node.input[0], out, node.input[1], bias, False))
    return found


# ---------------------------------------------------------------------------- mapping


@dataclass
class Recovered:
    """The state dict, config values and bookkeeping read off one graph."""

    config: dict[str, Any]
    tensors: dict[str, FloatArray]  # BertModel parameter name -> array in torch layout
    sources: dict[str, str]  # BertModel parameter name -> ONNX initializer
    unused: dict[str, list[int]]  # ONNX initializers no parameter took -> shape


class Mapper:
    """Assigns initializers to BertModel parameter names, each exactly once."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.tensors: dict[str, FloatArray] = {}
        self.sources: dict[str, str] = {}
        self.used: Counter[str] = Counter()

    def put(self, param: str, init: str, transpose: bool = False) -> None:
        if param in self.tensors:
            raise SystemExit(f"{param} assigned twice ({self.sources[param]}, {init})")
        a = np.asarray(self.g.inits[init], dtype=np.float32)
        self.tensors[param] = np.ascontiguousarray(a.T if transpose else a)
        self.sources[param] = init
        self.used[init] += 1

    def linear(self, prefix: str, lin: Linear) -> None:
        self.put(f"{prefix}.weight", lin.weight, transpose=not lin.transposed)
        if lin.bias is None:
            raise SystemExit(f"{prefix}: no bias found after {lin.weight}")
        self.put(f"{prefix}.bias", lin.bias)

    def layer_norm(self, prefix: str, ln: LayerNorm) -> None:
        self.put(f"{prefix}.weight", ln.gamma)
        self.put(f"{prefix}.bias", ln.beta)


def _data_root(g: Graph, tensor: str) -> str:
    """Follow an index tensor back through shape-only ops to where its values come from."""
    node = g.node_of(tensor)
    while node is not None and node.op_type in {
        "Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Slice", "Expand"
    }:  # fmt: skip
        tensor = node.input[0]
        node = g.node_of(tensor)
    return tensor


def _embeddings(g: Graph, m: Mapper) -> dict[str, str]:
    """Word, position and token-type tables: the Gathers on 2-D initializers. Tables indexed
    by graph inputs are word (the larger) and token type; the one indexed by a constant
    (a slice of position_ids) is position. Returns role -> graph input name."""
    inputs = {i.name for i in g.model.graph.input}
    by_input: dict[str, str] = {}
    position: list[str] = []
    for node in g.nodes:
        if node.op_type != "Gather" or not g.weight(node.input[0], 2):
            continue
        root = _data_root(g, node.input[1])
        if root in inputs:
            by_input[root] = node.input[0]
        else:
            position.append(node.input[0])
    if len(by_input) != 2 or len(position) != 1:
        raise SystemExit(f"embeddings: tables by input {by_input}, by constant {position}")
    word_in, type_in = sorted(by_input, key=lambda k: -g.inits[by_input[k]].shape[0])
    m.put("embeddings.word_embeddings.weight", by_input[word_in])
    m.put("embeddings.token_type_embeddings.weight", by_input[type_in])
    m.put("embeddings.position_embeddings.weight", position[0])
    return {"input_ids": word_in, "token_type_ids": type_in}


def _depends(g: Graph, later: Linear, earlier: Linear, stop: set[str]) -> bool:
    return earlier.out in g.upstream(later.x, stop)


def _heads_from_reshape(g: Graph, tensors: set[str], hidden: int) -> int | None:
    """Heads from the constant dims of the Reshape splitting a projection into heads."""
    for t in tensors:
        node = g.node_of(t)
        if node is None or node.op_type != "Reshape":
            continue
        dims: list[int] = []
        shape = g.consts.get(node.input[1])
        if shape is not None:
            dims = [int(d) for d in shape.reshape(-1)]
        else:
            concat = g.node_of(node.input[1])
            if concat is None or concat.op_type != "Concat":
                continue
            for part in concat.input:
                src = g.node_of(part)
                if src is not None and src.op_type == "Unsqueeze":
                    part = src.input[0]
                value = g.consts.get(part)
                dims.extend([-1] if value is None else [int(d) for d in value.reshape(-1)])
        if len(dims) >= 2 and dims[-2] > 0 and dims[-2] * dims[-1] == hidden:
            return dims[-2]
    return None


def _attention(
    g: Graph, m: Mapper, layer: int, block: list[Linear], stop: set[str], hidden: int
) -> int | None:
    """Query, key, value and output dense of one attention block; returns the heads seen."""
    outs = [lin for lin in block if all(_depends(g, lin, o, stop) for o in block if o is not lin)]
    if len(block) != 4 or len(outs) != 1:
        raise SystemExit(f"layer {layer}: attention block of {len(block)} projections")
    dense = outs[0]
    context = g.upstream(dense.x, stop)
    softmax = [n for t in context if (n := g.node_of(t)) is not None and n.op_type == "Softmax"]
    if len(softmax) != 1:
        raise SystemExit(f"layer {layer}: {len(softmax)} Softmax nodes before the output dense")
    # The context MatMul (probabilities x value) follows the softmax; the score MatMul
    # (query x key^T) is the last MatMul of two activations before it.
    ctx_mm = next(
        n
        for n in g.downstream_nodes(softmax[0].output[0])
        if n.op_type == "MatMul" and not any(x in g.inits for x in n.input)
    )
    score_up = g.upstream(softmax[0].input[0], stop)
    score_mm = next(
        g.nodes[g.producer[t]]
        for t in sorted(score_up, key=lambda t: -g.producer.get(t, -1))
        if (n := g.node_of(t)) is not None and n.op_type == "MatMul" and n.input[1] not in g.inits
    )
    roles = {
        "query": g.upstream(score_mm.input[0], stop),
        "key": g.upstream(score_mm.input[1], stop),
        "value": g.upstream(ctx_mm.input[1], stop),
    }
    prefix = f"encoder.layer.{layer}.attention"
    for role, reach in roles.items():
        hit = [lin for lin in block if lin is not dense and lin.out in reach]
        if len(hit) != 1:
            raise SystemExit(f"layer {layer}: {len(hit)} projections reach the {role} side")
        m.linear(f"{prefix}.self.{role}", hit[0])
    m.linear(f"{prefix}.output.dense", dense)
    return _heads_from_reshape(g, roles["query"], hidden)


def _activation(g: Graph, first: Linear, second: Linear) -> str:
    nodes = (g.node_of(t) for t in g.upstream(second.x, {first.out}) - {first.out})
    ops = {n.op_type for n in nodes if n is not None}
    if "Gelu" in ops or "Erf" in ops:
        return "gelu"  # exact (erf) GELU, transformers' "gelu"
    if "Tanh" in ops:
        return "gelu_new"
    if "Relu" in ops:
        return "relu"
    raise SystemExit(f"unknown activation between the feed-forward MatMuls: {sorted(ops)}")


def recover(g: Graph, heads: int | None) -> Recovered:
    """Map every initializer of a BERT encoder graph onto BertModel parameter names."""
    m = Mapper(g)
    inputs = _embeddings(g, m)
    norms = find_layer_norms(g)
    if len(norms) < 3 or len(norms) % 2 != 1:
        raise SystemExit(f"{len(norms)} LayerNorms: expected the embeddings' plus two per layer")
    layers = (len(norms) - 1) // 2
    m.layer_norm("embeddings.LayerNorm", norms[0])
    stop = {ln.out for ln in norms}
    rank = {ln.out: k for k, ln in enumerate(norms)}
    blocks: dict[int, list[Linear]] = {}
    for lin in find_linears(g):
        # The block is the latest LayerNorm the projection reads from.
        reached = [rank[t] for t in g.upstream(lin.x, stop) if t in rank]
        if not reached:
            raise SystemExit(f"{lin.weight} reads no LayerNorm output")
        blocks.setdefault(max(reached), []).append(lin)
    hidden = g.inits[norms[0].gamma].shape[0]
    seen_heads: set[int] = set()
    acts: set[str] = set()
    for layer in range(layers):
        ffn = blocks.pop(2 * layer + 1, [])
        attn = blocks.pop(2 * layer, [])
        found = _attention(g, m, layer, attn, stop, hidden)
        if found is not None:
            seen_heads.add(found)
        if len(ffn) != 2:
            raise SystemExit(f"layer {layer}: feed-forward block of {len(ffn)} projections")
        first, second = ffn if _depends(g, ffn[1], ffn[0], stop) else ffn[::-1]
        acts.add(_activation(g, first, second))
        m.linear(f"encoder.layer.{layer}.intermediate.dense", first)
        m.linear(f"encoder.layer.{layer}.output.dense", second)
        m.layer_norm(f"encoder.layer.{layer}.attention.output.LayerNorm", norms[2 * layer + 1])
        m.layer_norm(f"encoder.layer.{layer}.output.LayerNorm", norms[2 * layer + 2])
    if blocks:
        raise SystemExit(f"projections outside the encoder blocks: {blocks}")
    if len(acts) != 1 or len({ln.eps for ln in norms}) != 1:
        raise SystemExit(f"mixed activations {acts} or LayerNorm eps {[n.eps for n in norms]}")
    if heads is None:
        if len(seen_heads) != 1:
            raise SystemExit(f"heads not readable from the graph ({seen_heads}): pass --heads")
        heads = seen_heads.pop()
    elif seen_heads and seen_heads != {heads}:
        raise SystemExit(f"--heads {heads} but the graph splits into {sorted(seen_heads)}")
    twice = [k for k, n in m.used.items() if n > 1]
    if twice:
        raise SystemExit(f"initializers used more than once: {twice}")
    # The mapping comes from the graph; where an initializer does carry a parameter's name,
    # the two must agree.
    clash = {p: src for p, src in m.sources.items() if src in m.tensors and src != p}
    if clash:
        raise SystemExit(f"graph roles contradict initializer names: {clash}")
    t = m.tensors
    config = {
        "vocab_size": t["embeddings.word_embeddings.weight"].shape[0],
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": t["encoder.layer.0.intermediate.dense.weight"].shape[0],
        "max_position_embeddings": t["embeddings.position_embeddings.weight"].shape[0],
        "type_vocab_size": t["embeddings.token_type_embeddings.weight"].shape[0],
        "layer_norm_eps": float(f"{norms[0].eps:.6g}"),  # the float32 constant, rounded
        "hidden_act": acts.pop(),
        "onnx_inputs": inputs,
    }
    unused = {k: list(v.shape) for k, v in g.inits.items() if k not in m.used}
    return Recovered(config, m.tensors, m.sources, unused)
