"""The Triton file is parsed (never imported) and held to an allowlist:
  * imports: kernelcourse (bare), torch, triton, triton.language, math, typing;
  * no eval/exec/compile/__import__/open/getattr/globals/vars..., no name or attribute
    starting with an underscore (no torch._C, no __dict__, no __class__), no class, no
    global or nonlocal;
  * torch only for what launching needs (torch.Tensor, dtypes, empty/zeros buffers), triton
    only for jit/autotune/cdiv/...;
  * outside @triton.jit functions, launch plumbing only: no @, no slicing or indexed
    stores, no augmented assignment, loops over range() only, tensor attributes limited to
    stride/shape/size/numel/dtype/device: the arithmetic has to happen in a kernel;
  * inside @triton.jit functions (which the interpreter runs as Python), no name bound to
    torch, math or kernelcourse, and calls only to tl.* and other jit functions.
"""
from __future__ import annotations

import ast

from .errors import Refused

BANNED_NAMES = {"eval", "exec", "compile", "__import__", "open", "getattr", "setattr", "delattr",
                "globals", "locals", "vars", "breakpoint", "input", "memoryview", "dir",
                "super", "object", "type", "classmethod", "staticmethod", "property"}
IMPORTS = {"kernelcourse": set(), "torch": {"Tensor", "float32", "float16", "bfloat16", "int32",
           "int64", "dtype", "device", "Size", "empty", "empty_like", "zeros", "zeros_like"},
           "triton": {"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2",
                      "language"},
           "triton.language": None, "math": None, "typing": None, "__future__": None}
HOST_ATTRIBUTES = {"stride", "shape", "size", "numel", "dtype", "device", "is_contiguous",
                   "element_size", "ndim"}
HOST_BUILTINS = {"range", "len", "int", "float", "bool", "str", "min", "max", "abs", "round",
                 "isinstance", "print", "tuple", "divmod"}
JIT_BUILTINS = {"range", "min", "max", "int", "float", "len", "print"}


# ------------------------------------------------------------------------- the Triton file

def check_triton(text: str, filename: str) -> None:
    """Raise Refused with the first rule the file breaks (its line); return if it keeps them."""
    try:
        tree = ast.parse(text, filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Refused(f"{filename} does not parse: {exc}") from None
    _Triton(filename).run(tree)


class _Triton(ast.NodeVisitor):
    def __init__(self, filename: str):
        self.filename = filename
        self.modules: dict[str, str] = {}        # local name -> the module it is bound to
        self.imported: set[str] = set()          # names imported from an allowed module
        self.jit: set[str] = set()               # names of @triton.jit functions in the file
        self.defined: set[str] = set()           # every function the file defines
        self.in_jit = False

    def refuse(self, node, what: str):
        raise Refused(f"{self.filename}, line {getattr(node, 'lineno', '?')}: {what}")

    def run(self, tree: ast.Module):
        for node in tree.body:                   # functions first: the host may call them
            if isinstance(node, ast.FunctionDef):
                self.defined.add(node.name)
                if any(self._is_jit(d) for d in node.decorator_list):
                    self.jit.add(node.name)
        self.visit(tree)

    def _is_jit(self, decorator) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return ast.unparse(target) in ("triton.jit", "jit", "triton.autotune", "autotune",
                                       "triton.heuristics", "heuristics")

    # -- imports and names
    def visit_Import(self, node):
        for alias in node.names:
            if alias.name not in IMPORTS:
                self.refuse(node, f"imports {alias.name}; a submission may import only "
                                  f"{', '.join(sorted(IMPORTS))}")
            local = alias.asname or alias.name.split(".")[0]
            self.modules[local] = alias.name if alias.asname else alias.name.split(".")[0]

    def visit_ImportFrom(self, node):
        module = node.module or ""
        if node.level or module not in IMPORTS:
            self.refuse(node, f"imports from {module or '.'}; a submission may import only "
                              f"{', '.join(sorted(IMPORTS))}")
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if full in IMPORTS:
                self.modules[alias.asname or alias.name] = full
            elif not self._attribute_allowed(module, alias.name):
                self.refuse(node, f"imports {full}, which a kernel submission may not use")
            else:
                self.imported.add(alias.asname or alias.name)

    def _attribute_allowed(self, module: str, name: str) -> bool:
        allowed = IMPORTS[module]
        return not name.startswith("_") and (allowed is None or name in allowed)

    def visit_Name(self, node):
        if node.id in BANNED_NAMES or (node.id.startswith("__") and node.id != "__name__"):
            self.refuse(node, f"uses {node.id}, which a submission may not use (no dynamic "
                              "imports, eval, file access or introspection)")
        if self.in_jit and self.modules.get(node.id) not in (None, "triton", "triton.language"):
            self.refuse(node, f"uses {node.id} inside a @triton.jit function: a kernel computes "
                              "with tl.* only")

    def visit_Attribute(self, node):
        if node.attr.startswith("_"):
            self.refuse(node, f"uses .{node.attr}: no private or special attributes")
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.modules:
            module = self.modules[base.id]
            full = f"{module}.{node.attr}"
            if full in IMPORTS:
                pass
            elif not self._attribute_allowed(module, node.attr):
                self.refuse(node, f"uses {ast.unparse(node)}, which a kernel submission may not "
                                  "use (a library GEMM or any library arithmetic is not a kernel)")
        elif not self.in_jit and node.attr not in HOST_ATTRIBUTES and not self._module_chain(base):
            self.refuse(node, f"uses {ast.unparse(node)} outside a @triton.jit function; there "
                              f"a tensor may give only {', '.join(sorted(HOST_ATTRIBUTES))}")
        self.generic_visit(node)

    def _module_chain(self, node) -> bool:
        """triton.language.xyz: an attribute of a module alias's allowed submodule."""
        return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and f"{self.modules.get(node.value.id)}.{node.attr}" in IMPORTS)

    # -- functions: which rules hold inside
    def visit_FunctionDef(self, node):
        jit = node.name in self.jit
        if jit and self.in_jit:
            self.refuse(node, "defines a function inside a @triton.jit function")
        for decorator in node.decorator_list:
            self.visit(decorator)
        outer, self.in_jit = self.in_jit, self.in_jit or jit
        for child in [node.args, *node.body]:
            self.visit(child)
        if node.returns:
            self.visit(node.returns)
        self.in_jit = outer

    def visit_AsyncFunctionDef(self, node):
        self.refuse(node, "defines an async function")

    def visit_ClassDef(self, node):
        self.refuse(node, "defines a class (a kernel submission needs none)")

    def visit_Global(self, node):
        self.refuse(node, "uses global: no state kept between calls")

    visit_Nonlocal = visit_Global

    def visit_Call(self, node):
        func = node.func
        self.visit(func)                          # a banned name is named as such first
        if self.in_jit and isinstance(func, ast.Name) and func.id not in self.jit | JIT_BUILTINS:
            self.refuse(node, f"calls {func.id}() inside a @triton.jit function")
        if not self.in_jit and isinstance(func, ast.Name) and \
                func.id not in self.imported | self.defined | HOST_BUILTINS:
            self.refuse(node, f"calls {func.id}() outside a @triton.jit function")
        for child in [*node.args, *node.keywords]:
            self.visit(child)

    # -- host code: launch plumbing only
    def visit_BinOp(self, node):
        if isinstance(node.op, ast.MatMult) and not self.in_jit:
            self.refuse(node, "multiplies with @ outside a kernel")
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        if not self.in_jit:
            self.refuse(node, "updates a value in place (+= and kin) outside a kernel")
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if not self.in_jit:
            launch = isinstance(node.value, ast.Name) and node.value.id in self.jit
            constant = isinstance(node.slice, ast.Constant) and isinstance(node.ctx, ast.Load)
            if not (launch or constant):
                self.refuse(node, f"indexes {ast.unparse(node)} outside a kernel: there only "
                                  "kernel[grid] launches and constant look-ups")
        self.generic_visit(node)

    def _iteration(self, node, iterable):
        if not self.in_jit:
            is_range = isinstance(iterable, ast.Call) and ast.unparse(iterable.func) == "range"
            if not (is_range or isinstance(iterable, (ast.Tuple, ast.List))):
                self.refuse(node, f"loops over {ast.unparse(iterable)} outside a kernel: only "
                                  "over range() or a literal list")

    def visit_For(self, node):
        self._iteration(node, node.iter)
        self.generic_visit(node)

    def visit_comprehension(self, node):
        self._iteration(node.iter, node.iter)
        self.generic_visit(node)
