"""Stand-in for torch: xgrammar and tvm_ffi import it, the grammar API never uses it."""
__version__ = "0.0.0"
class Tensor:
    pass
class _Attr:
    """Any attribute path (`torch.int8`, `torch.cuda.is_available`): a distinct
    hashable object that answers False when called."""

    def __init__(self, name):
        self.name = name
    def __repr__(self):
        return "torch." + self.name
    def __call__(self, *a, **k):
        return False
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Attr(self.name + "." + name)
_cache = {}
def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _cache.setdefault(name, _Attr(name))
