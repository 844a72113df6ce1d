"""HBFSim's own reference package, solved at steady state: what its thermal parameters imply for the power at
which each die reaches its limit (the figure §6.3 of paper 001 reports), beside our serving package.

The HBFSim paper states no layer resistance, heat-sink or package figure (§6.3, paper 001 line 136, gives only
results of its reconstructed operator). Its open code does state a package: the reference scenario of its
thermal comparison (github.com/SlugLab/HBFSim configs/eq3_thermal/reference/package_scenario.json and
materials.json): a 40 x 40 mm package tiled 4 x 4 in 10 mm cells (the GPU the middle 2 x 2, four HBM and four
HBF tiles around it, the corners inactive), a 100 um silicon source layer under a 400 um silicon spreader, one
convection boundary on top (1,400 W/m^2K, which HBFSim takes from the MFIT example case), 300 K ambient,
silicon k = 150 W/mK (MFIT's material table); the sensor of a die is its tile's area-average temperature.
`solve` discretises that case by finite volumes (HBFSim's own meshes: 2 mm coarse, 1 mm fine) and returns the
3 x 3 matrix of region-average rises per watt; `package_rc` turns it into our three-node network.
"""
from dataclasses import dataclass

import numpy as np

from ..errors import require
from .thermal import NODES, PackageRC

# Tiles of the scenario (x, y in 10 mm units, width, height) by die type; a die type's power is spread evenly
# over its tiles, and its temperature is the mean of its tiles' averages (the tiles are alike in area).
TILES = {"gpu": ((1, 1, 2, 2),),
         "hbm": ((1, 0, 1, 1), (0, 1, 1, 1), (0, 2, 1, 1), (1, 3, 1, 1)),
         "hbf": ((2, 0, 1, 1), (3, 1, 1, 1), (3, 2, 1, 1), (2, 3, 1, 1))}


@dataclass(frozen=True)
class ReferencePackage:
    """HBFSim's reference scenario (configs/eq3_thermal/reference/, SlugLab/HBFSim), SI units."""
    side_m: float = 0.04
    tile_m: float = 0.01
    source_m: float = 1e-4
    spreader_m: float = 4e-4
    top_htc_w_m2k: float = 1400.0
    conductivity_w_mk: float = 150.0
    volumetric_heat_j_m3k: float = 2330.0 * 710.0     # silicon density x specific heat (MFIT's table)
    ambient_c: float = 300.0 - 273.15

    def __post_init__(self) -> None:
        require(min(self.side_m, self.tile_m, self.source_m, self.spreader_m, self.top_htc_w_m2k,
                    self.conductivity_w_mk, self.volumetric_heat_j_m3k) > 0,
                "reference package: dimensions and material figures must be > 0")


def solve(package: ReferencePackage = ReferencePackage(), cell_m: float = 0.001) -> np.ndarray:
    """K/W: entry [a, b] is die type a's average temperature rise per watt into die type b (node order), at
    steady state. Two silicon layers of `cell_m` square cells: lateral conduction within each layer, vertical
    between a source cell and the spreader cell above it (half of each thickness), and from a spreader cell to
    the ambient through half its thickness and the top convection. The bottom and sides are adiabatic."""
    n = round(package.side_m / cell_m)
    per_tile = round(package.tile_m / cell_m)
    require(n * cell_m == package.side_m and per_tile * cell_m == package.tile_m,
            f"reference package: a {cell_m} m cell must divide the tiles")
    k, area, cells = package.conductivity_w_mk, cell_m * cell_m, n * n
    g = np.zeros((2 * cells, 2 * cells))
    grid = np.arange(cells).reshape(n, n)
    for layer, thickness in enumerate((package.source_m, package.spreader_m)):
        lateral = k * thickness             # k x (thickness x cell) / cell
        for a, b in ((grid[:, :-1], grid[:, 1:]), (grid[:-1, :], grid[1:, :])):
            _connect(g, layer * cells + a.ravel(), layer * cells + b.ravel(), lateral)
    _connect(g, grid.ravel(), cells + grid.ravel(), k * area / ((package.source_m + package.spreader_m) / 2))
    top = 1 / (package.spreader_m / 2 / (k * area) + 1 / (package.top_htc_w_m2k * area))
    g[cells + grid.ravel(), cells + grid.ravel()] += top
    masks = np.zeros((len(NODES), cells))
    for node, name in enumerate(NODES):
        for x, y, w, h in TILES[name]:
            tile = np.zeros((n, n))
            tile[y * per_tile:(y + h) * per_tile, x * per_tile:(x + w) * per_tile] = 1.0
            masks[node] += tile.ravel()
    power = np.zeros((2 * cells, len(NODES)))
    power[:cells] = (masks / masks.sum(axis=1, keepdims=True)).T          # 1 W per die type, spread evenly
    rise = np.linalg.solve(g, power)[:cells]
    return (masks / masks.sum(axis=1, keepdims=True)) @ rise


def _connect(g: np.ndarray, a: np.ndarray, b: np.ndarray, conductance: float) -> None:
    np.add.at(g, (a, a), conductance)
    np.add.at(g, (b, b), conductance)
    np.add.at(g, (a, b), -conductance)
    np.add.at(g, (b, a), -conductance)


def package_rc(package: ReferencePackage = ReferencePackage(), cell_m: float = 0.001,
               limits_c: tuple[float, float, float] = PackageRC().limits_c) -> PackageRC:
    """The three-node network with `solve`'s steady state (its conductance matrix is the inverse of the
    resistance matrix), each node's capacitance its tiles' silicon."""
    g = np.linalg.inv(solve(package, cell_m))
    coupling = tuple(float(-1 / g[a, b]) for a, b in ((0, 1), (0, 2), (1, 2)))
    to_coolant = tuple(float(1 / g[i].sum()) for i in range(3))
    volume = (package.source_m + package.spreader_m) * package.tile_m ** 2
    capacitance = tuple(sum(w * h for _, _, w, h in TILES[name]) * volume * package.volumetric_heat_j_m3k
                        for name in NODES)
    return PackageRC(to_coolant=to_coolant, capacitance=capacitance, coupling=coupling, limits_c=limits_c)
