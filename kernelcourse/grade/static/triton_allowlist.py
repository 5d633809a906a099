"""What a graded Triton file may hold, as tables: the modules and the exact names each may
give, the attributes and builtins on the host and in a kernel, the annotations and
decorator arguments, and the syntax refused, each with the sentence that refuses it.
python_rules.py holds a file to them. Widen a table only for a name a GEMM kernel needs and
no library GEMM hides behind.
"""
import ast

BANNED_NAMES = {"eval", "exec", "compile", "__import__", "open", "getattr", "setattr", "delattr",
                "globals", "locals", "vars", "breakpoint", "input", "memoryview", "dir",
                "super", "object", "type", "classmethod", "staticmethod", "property"}
# The names each allowed module may give (`from M import name` or `M.name`).
TORCH = {"Tensor", "float32", "float16", "bfloat16", "int32", "int64", "dtype", "device", "Size",
         "empty", "empty_like", "zeros", "zeros_like"}
TRITON = {"jit", "autotune", "Config", "cdiv", "next_power_of_2", "language"}
TL = {"arange", "program_id", "num_programs", "zeros", "zeros_like", "full", "load", "store", "dot",
      "cdiv", "minimum", "maximum", "where", "sum", "range", "static_range", "constexpr", "float32",
      "float16", "bfloat16", "int32", "int64", "multiple_of", "max_contiguous", "trans", "swizzle2d"}
MATH = {"ceil", "floor", "log2", "sqrt", "prod", "gcd", "isqrt"}
IMPORTS = {"kernelcourse": set(), "torch": TORCH, "triton": TRITON, "triton.language": TL, "math": MATH}
SUBMODULES = {"triton.language"}        # reached as triton.language.<name> too
REFUSED_MODULES = {
    "typing": "its namespace holds sys, and get_type_hints evaluates strings as code; a "
              "kernel file needs no typing",
    "__future__": "`annotations` would turn every annotation into a string that typing or "
                  "Triton evaluates later; a kernel file needs no __future__",
}
HOST_ATTRIBUTES = {"stride", "shape", "size", "numel", "dtype", "device", "is_contiguous",
                   "element_size", "ndim"}
JIT_ATTRIBUTES = {"to", "dtype", "element_ty", "shape", "T", "trans", "reshape"}
HOST_BUILTINS = {"range", "len", "int", "float", "bool", "str", "min", "max", "abs", "round",
                 "isinstance", "print", "tuple", "divmod", "__name__"}
JIT_BUILTINS = {"range", "min", "max"}
ANNOTATIONS = {"int", "float", "bool", "str", "torch.Tensor", "triton.language.constexpr"}
CONFIG_KEYWORDS = {"num_warps", "num_stages", "num_ctas", "maxnreg"}
AUTOTUNE_ARGUMENTS = ("configs", "key")

# Syntax a kernel file never needs, each with the sentence that refuses it. Any node type
# not in ALLOWED_NODES and not here is refused by its name.
REFUSED_NODES = {
    ast.ClassDef: "defines a class (a kernel submission needs none)",
    ast.AsyncFunctionDef: "defines an async function",
    ast.Global: "uses global: no state kept between calls",
    ast.Nonlocal: "uses nonlocal: no state kept between calls",
    ast.Try: "catches exceptions (try): a kernel file has nothing to recover from",
    ast.With: "uses with: a kernel file opens nothing",
    ast.Raise: "raises an exception: a kernel file has none of its own",
    ast.Delete: "deletes a name (del)",
    ast.Match: "uses match: its patterns look attributes up by name",
    ast.NamedExpr: "uses := (an assignment inside an expression)",
    ast.Yield: "makes a generator (yield)",
    ast.YieldFrom: "makes a generator (yield from)",
    ast.Await: "uses await",
}
if hasattr(ast, "TryStar"):
    REFUSED_NODES[ast.TryStar] = REFUSED_NODES[ast.Try]
ALLOWED_NODES = (
    ast.Module, ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.If, ast.For,
    ast.While, ast.Pass, ast.Break, ast.Continue, ast.Assert, ast.FunctionDef, ast.Import,
    ast.ImportFrom, ast.alias, ast.arguments, ast.arg, ast.keyword, ast.Name, ast.Constant,
    ast.Attribute, ast.Subscript, ast.Slice, ast.Call, ast.BinOp, ast.UnaryOp, ast.BoolOp,
    ast.Compare, ast.IfExp, ast.Tuple, ast.List, ast.Dict, ast.Set, ast.Starred, ast.ListComp,
    ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension, ast.Lambda, ast.JoinedStr,
    ast.FormattedValue, ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
)
SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda, ast.FunctionDef,
          ast.AsyncFunctionDef, ast.ClassDef)
