"""The spec pages (the cluster spec `sunk:cluster`, the operator's `sunk:operator`, the tenant
policy): one section per model, a row per field."""

from __future__ import annotations

from pydantic import BaseModel

from .fields import Section, sections
from .markdown import code, one_line, page, table

HEADER = ("Field", "Type", "Default", "Constraints", "Description")


def spec_page(root: type[BaseModel], title: str, intro: str) -> tuple[str, int]:
    """The page, and how many fields it lists (each model's once, however often it is used)."""
    found = sections(root)
    by_model = {s.model: s for s in found}
    parts = []
    for section in found:
        links = {at: by_model[sub].anchor for at, sub in section.children}
        parts.append(_section(section, title, links))
    return page(title, intro, parts), sum(len(s.rows) for s in found)


def _section(section: Section, root_title: str, links: dict[str, str]) -> str:
    name = section.model.__name__
    where = section.paths[0]
    title = f"`{where}` ({name})" if where else f"{root_title} ({name})"
    rows = []
    for row in section.rows:
        kind = row.type
        if row.path in links:
            kind += f", see [{links[row.path]}](#{links[row.path]})"
        rows.append((code(row.path), kind, row.default, row.constraints, row.description))
    lines = [f'<a id="{section.anchor}"></a>', "", f"## {title}", ""]
    doc = (section.model.__doc__ or "").strip()
    if doc and not doc.startswith(f"{name}("):
        lines += [one_line(doc), ""]
    if len(section.paths) > 1:
        lines += ["Also at: " + ", ".join(code(p) for p in section.paths[1:]) + ".", ""]
    lines.append(table(HEADER, rows))
    return "\n".join(lines)
