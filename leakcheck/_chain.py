"""Why is this object still alive?  The shortest chain of references from
a root to it.

Roots, as the report names them:

- a module global (the chain starts in a module's namespace);
- a class attribute (the chain starts at a class held by a module);
- a local variable of a running frame, on any thread;
- C code, when nothing the garbage collector sees leads to the object: a
  static reference in an extension, or one that was never released (a
  missing Py_DECREF).

The search runs forward, breadth first, from the roots through
gc.get_referents: it sees objects frozen with gc.freeze() and untracked
containers, which gc.get_referrers does not.  When no root leads to the
object, a backward walk through gc.get_referrers finds the object nothing
visible refers to: the one C holds.  Neither follows leakcheck's own
frames and containers.  Only called after a verdict: each costs a pass
over the heap.
"""

import collections
import gc
import sys
import types

from . import cpython
from ._evidence import is_own
from ._evidence.objects import describe, type_name

__all__ = ["find_chain", "find_chains", "edge"]

_MAX_DEPTH = 40
_MAX_NODES = 20000


def find_chain(holder, exclude=()):
    """The chain that keeps ``holder[0]`` alive, as a dict (see
    Diagnosis.chains).  The caller refers to the object only through the
    one-element list `holder` and the containers in `exclude` (which the
    search does not follow), so that the references it holds itself are
    known and do not read as references from C."""
    frames = _stack_frames()
    locals_of = _frame_locals(frames)
    unseen = _unseen_refs(holder, exclude, locals_of)
    chain = _forward(holder, exclude, frames)
    if chain is None:
        chain = _walk(holder, exclude, frames, locals_of)
    chain["unseen_refs"] = unseen
    return chain


def _own(frame):
    return is_own(frame.f_code.co_filename)


def _stack_frames():
    """Every frame on every thread's stack, leakcheck's own left out."""
    frames = []
    for top in sys._current_frames().values():
        frame = top
        while frame is not None:
            if not _own(frame):
                frames.append(frame)
            frame = frame.f_back
    return frames


def _items(frame):
    try:
        return list(frame.f_locals.items())
    except Exception:
        return []


def _frame_locals(frames):
    """{id(value): [(frame, name), ...]} for the locals of `frames`."""
    found = {}
    for frame in frames:
        for name, value in _items(frame):
            found.setdefault(id(value), []).append((frame, name))
    return found


def _unseen_refs(holder, exclude, locals_of):
    """References to holder[0] that neither an object the collector sees
    nor a frame's local variable accounts for; None when that cannot be
    told: containers of an object the collector does not track may be
    untracked too, and then invisible."""
    if not gc.is_tracked(holder[0]):
        return None
    count = sys.getrefcount(holder[0]) - 2   # the argument, and `holder`
    visible = 0
    for container in exclude:
        visible += sum(1 for x in gc.get_referents(container)
                       if x is holder[0])
    args = (holder[0],)
    for referrer in _referrers(args):
        if referrer is holder or any(referrer is c for c in exclude) or (
                isinstance(referrer, types.FrameType) and _own(referrer)):
            continue
        visible += sum(1 for x in gc.get_referents(referrer)
                       if x is holder[0])
    for frame, _ in locals_of.get(id(holder[0]), ()):
        if not (cpython.FRAMES_TRAVERSED and gc.is_tracked(frame)):
            visible += 1
    return max(count - visible, 0)


def _referrers(args):
    """gc.get_referrers(*args), without the tuple that passes `args`: some
    versions (3.13) report the call's own argument tuple as a referrer."""
    return [r for r in gc.get_referrers(*args)
            if r is not args and not (type(r) is tuple and len(r) == len(args)
                                      and all(a is b for a, b in zip(r, args)))]


def _namespaces():
    """{id(namespace): module} for the modules imported."""
    module_of = {}
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict):
            module_of[id(namespace)] = module
    return module_of


def _forward(holder, exclude, frames):
    """The chain from the nearest root, or None when no root leads to
    holder[0]."""
    target = holder[0]
    module_of = _namespaces()
    skip = {id(c) for c in exclude}
    skip.update((id(holder), id(frames)))
    found = _search([target], skip, frames, module_of)
    chain = _chain_of(target, found, module_of)
    found.clear()
    if chain is not None:
        del chain["root_file"]
    return chain


def _search(targets, skip, frames, module_of):
    """Breadth first from the roots (the frames' locals, then the modules'
    namespaces) through gc.get_referents, until every object in `targets`
    is reached or nothing is left: {id(target): (path from the root to
    it, root)} of those reached, a root being (kind, text, expression,
    file).  Objects whose ids are in `skip` are not followed."""
    wanted = {id(t) for t in targets}
    parent = {}                         # id -> id of what refers to it
    nodes = {}                          # id -> object, for every one reached
    roots = {}                          # id -> root
    queue = collections.deque()
    skip = set(skip)
    skip.update((id(targets), id(wanted)))
    for frame in frames:
        code = frame.f_code
        for name, value in _items(frame):
            if id(value) not in nodes and id(value) not in skip:
                nodes[id(value)] = value
                roots[id(value)] = (
                    "frame", f"local variable {name!r} of {code.co_name}() "
                             f"({code.co_filename}:{frame.f_lineno})", name,
                    code.co_filename)
                queue.append(value)
    for key, module in module_of.items():
        if key not in nodes:
            nodes[key] = module.__dict__
            roots[key] = ("module", f"a global of module {module.__name__}",
                          module.__name__, _file_of(module))
            queue.append(module.__dict__)
    skip.update((id(parent), id(nodes), id(roots), id(queue),
                 id(module_of), id(skip)))
    missing = wanted - nodes.keys()
    while queue and missing:
        obj = queue.popleft()
        if isinstance(obj, types.FrameType) and _own(obj):
            continue
        for child in gc.get_referents(obj):
            key = id(child)
            if key in nodes or key in skip:
                continue
            nodes[key] = child
            parent[key] = id(obj)
            if key in missing:
                missing.discard(key)
                if not missing:
                    break
            queue.append(child)
    found = {}
    for key in wanted - missing:
        path = []
        at = key
        while at is not None:
            path.append(nodes[at])
            at = parent.get(at)
        path.reverse()
        found[key] = (path, roots[id(path[0])])
    # Nothing here may outlive the call: what it holds would read as
    # referrers, and keep objects alive.
    for container in (parent, nodes, roots, queue):
        container.clear()
    return found


def _file_of(module):
    name = getattr(module, "__file__", None)
    return name if isinstance(name, str) else None


def _chain_of(target, found, module_of, describer=describe):
    """The chain dict of `target` from _search()'s `found`, or None; its
    "object" is describer(target), left out when `describer` is None."""
    if id(target) not in found:
        return None
    path, (kind, text, expression, filename) = found[id(target)]
    if (kind == "module" and len(path) > 2 and isinstance(path[1], type)
            and _edge(path[1], path[2]).startswith(".")):
        # A global that is a class, and one of its attributes.
        kind, text = "class", f"an attribute of class {type_name(path[1])}"
        expression = type_name(path[1])
        path = path[1:]
    steps, expression = _steps(path, expression, module_of)
    chain = {"object": None, "watched_at": None, "root": text,
             "kind": kind, "expression": expression, "path": steps,
             "root_file": filename}
    if describer is None:
        del chain["object"]
    else:
        chain["object"] = describer(target)
    return chain


def find_chains(holder, exclude=()):
    """The chains that keep each object of the list `holder` alive, in one
    pass over the heap: a list as long, each a chain dict as find_chain()
    gives (without "object", which would take the object's repr, nor
    "unseen_refs"; with "root_file": the file of the frame or module the
    chain starts from, or None), or None for an object that
    no module, class or frame leads to (one C holds, or a cycle nothing
    holds).  The caller refers to the objects only through `holder` and
    the containers in `exclude`, which the search does not follow."""
    module_of = _namespaces()
    frames = _stack_frames()
    skip = {id(c) for c in exclude}
    skip.update((id(holder), id(frames)))
    found = _search(holder, skip, frames, module_of)
    try:
        return [_chain_of(obj, found, module_of, None) for obj in holder]
    finally:
        found.clear()


def _walk(holder, exclude, frames, locals_of):
    """The chain found walking referrers back from holder[0], one heap
    pass per level, up to a root or to the object C holds."""
    target = holder[0]
    module_of = _namespaces()
    nodes = {id(target): target}          # every object reached
    toward = {id(target): None}           # referrer id -> the id it refers to
    own = {id(nodes), id(toward), id(frames), id(locals_of), id(module_of),
           id(holder), *(id(c) for c in exclude)}
    level = [target]
    kept = [level]                        # never freed: their ids stay ours
    own.update((id(level), id(kept)))
    root, dead_end = None, None

    for depth in range(_MAX_DEPTH):
        for node in level:
            root = _root_of(node, node is target, locals_of, module_of)
            if root is not None:
                break
        if root is not None or len(nodes) > _MAX_NODES:
            break
        args = tuple(level)
        referrers = _referrers(args)
        following = []
        kept += (args, referrers, following)
        own.update((id(args), id(referrers), id(following)))
        ids = {id(node) for node in level}
        held = set()
        for referrer in referrers:
            rid = id(referrer)
            if rid in own or rid in nodes or (
                    isinstance(referrer, types.FrameType) and _own(referrer)):
                if rid in nodes:
                    held.update(id(x) for x in gc.get_referents(referrer)
                                if id(x) in ids)
                continue
            for child in gc.get_referents(referrer):
                if id(child) in ids:
                    held.add(id(child))
                    if rid not in toward:
                        toward[rid] = id(child)
                        nodes[rid] = referrer
                        following.append(referrer)
        if dead_end is None:
            for node in level:
                if id(node) not in held and id(node) not in locals_of:
                    dead_end = node
                    break
        if not following:
            if dead_end is None:
                dead_end = level[0]
            break
        level = following

    if root is None:
        start = dead_end if dead_end is not None else target
        root = ("c", f"C code: nothing the garbage collector sees refers to "
                     f"the {describe(start)} (a static reference in an "
                     f"extension, or a reference never released)",
                f"<{type_name(type(start))} held by C>", start)
    kind, text, expression, start = root
    path = _path(start, nodes, toward)
    steps, expression = _steps(path, expression, module_of)
    return {"object": describe(target), "watched_at": None, "root": text,
            "kind": kind, "expression": expression, "path": steps}


def _root_of(node, is_target, locals_of, module_of):
    """(kind, text, expression, node) when `node` is a root, else None."""
    holders = locals_of.get(id(node))
    if holders:
        frame, name = holders[0]
        code = frame.f_code
        return ("frame", f"local variable {name!r} of {code.co_name}() "
                         f"({code.co_filename}:{frame.f_lineno})", name, node)
    if is_target:
        return None
    if id(node) in module_of:
        module = module_of[id(node)]
        return ("module", f"a global of module {module.__name__}",
                module.__name__, node)
    if isinstance(node, types.ModuleType):
        return ("module", f"module {node.__name__}", node.__name__, node)
    if isinstance(node, type):
        return ("class", f"an attribute of class {type_name(node)}",
                type_name(node), node)
    return None


def _path(start, nodes, toward):
    path = [start]
    key = toward.get(id(start))
    while key is not None:
        path.append(nodes[key])
        key = toward.get(key)
    return path


def _steps(path, expression, module_of):
    """The edges of `path` as [{"edge", "type"}], and the expression that
    reaches the last object from the root's (None when an edge cannot be
    written as one).  A namespace's key reads as an attribute: module.x,
    Cls.x, obj.x rather than obj.__dict__['x']."""
    steps = []
    for parent, child in zip(path, path[1:]):
        steps.append({"edge": _edge(parent, child),
                      "type": type_name(type(child))})
    text = expression
    for i, step in enumerate(steps):
        edge = step["edge"]
        if not edge.startswith((".", "[")):
            return steps, None
        namespace = (id(path[i]) in module_of
                     or text.endswith(".__dict__"))
        key = edge[2:-2] if edge.startswith("['") else None
        if namespace and key is not None and key.isidentifier():
            if text.endswith(".__dict__"):
                text = text[:-len(".__dict__")]
            text += "." + key
        else:
            text += edge
    return steps, text


def _edge(parent, child):
    """How `parent` refers to `child`, as an expression suffix (".name",
    "[key]"), or a phrase when it cannot be written as one."""
    try:
        if isinstance(parent, dict):
            for key, value in parent.items():
                if value is child:
                    return f"[{key!r}]"
                if key is child:
                    return " (a key)"
        elif isinstance(parent, (list, tuple)):
            for i, value in enumerate(parent):
                if value is child:
                    return f"[{i}]"
        elif isinstance(parent, (set, frozenset)):
            return " (a member)"
        elif isinstance(parent, types.CellType if hasattr(types, "CellType")
                        else type((lambda x: lambda: x)(0).__closure__[0])):
            return ".cell_contents"
        elif isinstance(parent, types.FrameType):
            for name, value in parent.f_locals.items():
                if value is child:
                    return f" (local {name!r})"
        elif isinstance(parent, types.MethodType):
            return ".__self__" if parent.__self__ is child else ".__func__"
        elif isinstance(parent, types.FunctionType):
            for attr in ("__closure__", "__defaults__", "__kwdefaults__",
                         "__globals__", "__dict__", "__code__"):
                if getattr(parent, attr, None) is child:
                    return "." + attr
        if isinstance(parent, type):
            for name, value in vars(parent).items():
                if value is child:
                    return "." + name
            if child in gc.get_referents(parent) and isinstance(child, dict):
                return ".__dict__"
        elif getattr(parent, "__dict__", None) is child:
            return ".__dict__"
        else:
            namespace = getattr(parent, "__dict__", None)
            if isinstance(namespace, dict):
                for name, value in namespace.items():
                    if value is child:
                        return "." + name
            for cls in type(parent).__mro__:
                for name in getattr(cls, "__slots__", ()):
                    if getattr(parent, name, None) is child:
                        return "." + name
    except Exception:
        pass
    return f" -> (held by a {type_name(type(parent))})"


edge = _edge
