"""The hierarchy drawing returned by ``Group.tree()``."""

from __future__ import annotations

import dataclasses

__all__ = ["Tree", "TreeNode"]


@dataclasses.dataclass(frozen=True)
class TreeNode:
    """One line of the tree and the nodes below it."""

    label: str
    children: tuple[TreeNode, ...]


@dataclasses.dataclass(frozen=True)
class Tree:
    """A group hierarchy; ``str()`` draws it with box-drawing characters, children sorted."""

    root: TreeNode

    def __str__(self) -> str:
        lines = [self.root.label]
        self._draw(self.root, " ", lines)
        return "\n".join(lines)

    __repr__ = __str__

    def _draw(self, node: TreeNode, indent: str, lines: list[str]) -> None:
        for index, child in enumerate(node.children):
            last = index == len(node.children) - 1
            lines.append(f"{indent}{'└── ' if last else '├── '}{child.label}")
            self._draw(child, indent + ("    " if last else "│   "), lines)
