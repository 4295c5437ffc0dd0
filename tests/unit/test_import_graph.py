"""No import circle between tenantq modules: imports inside functions count, imports that only
a type checker reads (``if TYPE_CHECKING:``) do not, since they never run.

``make lint`` runs import-linter's contracts (``pyproject.toml``): the layers, and no circle
among the children of any package. This looks at every module one by one, so it also sees a
circle through a package's own ``__init__``, which the children of a package leave out."""

from __future__ import annotations

import grimp  # the import graph import-linter builds its contracts on


def test_no_module_is_imported_back_by_what_it_imports() -> None:
    graph = grimp.build_graph("tenantq", exclude_type_checking_imports=True, cache_dir=None)
    circles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                circles.append(" -> ".join((importer, *back)))
    assert not circles, f"{len(circles)} imports close a circle:\n" + "\n".join(circles[:20])
