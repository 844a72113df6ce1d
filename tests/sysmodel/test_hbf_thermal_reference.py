"""The package thermal model against references that do not use it (issue 36): Kirchhoff's laws solved by hand
for a resistor chain, and the coupled network's transient integrated by an independent fixed-step RK4; HBFSim's
reference package (its open code's thermal case) against the isothermal convection limit, reciprocity and its
own two meshes.

Tolerances: 1e-9 K for the closed forms (float rounding of the eigen-solution); 1e-6 K for RK4 at 1 ms steps
(its error, ~dt^4 / tau^4, is far below that for time constants of 0.1 s and more)."""
import numpy as np
import pytest

from sysmodel.hbf.reference_package import ReferencePackage, package_rc, solve
from sysmodel.errors import ConfigError
from sysmodel.hbf.thermal import PackageRC, Thermal, limit_powers

OPEN = 1e15          # K/W: a path that carries no heat


def test_steady_state_of_a_resistor_chain_is_kirchhoffs() -> None:
    """GPU -> HBM -> coolant in series (the GPU's own path to the coolant open), HBF apart: heat into the GPU
    crosses both resistors, heat into the HBM only the second."""
    r_gpu_hbm, r_hbm, r_hbf = 0.2, 0.15, 0.6
    rc = PackageRC(to_coolant=(OPEN, r_hbm, r_hbf), coupling=(r_gpu_hbm, OPEN, OPEN))
    p_gpu, p_hbm, p_hbf = 300.0, 40.0, 10.0
    temps = Thermal(rc, 45.0).steady((p_gpu, p_hbm, p_hbf))
    hbm = 45.0 + (p_gpu + p_hbm) * r_hbm
    assert temps == pytest.approx([hbm + p_gpu * r_gpu_hbm, hbm, 45.0 + p_hbf * r_hbf], abs=1e-9)


def test_steady_state_of_a_delta_network_is_its_nodal_solution() -> None:
    """Every path finite (the default package): power into the GPU only. The nodal equations, written out by
    hand for this case and solved by Cramer's rule, give the three temperature rises."""
    rc = PackageRC()
    (a, b, c), (gab, gac, gbc) = (1 / r for r in rc.to_coolant), (1 / r for r in rc.coupling)
    p = 500.0
    m = [[a + gab + gac, -gab, -gac], [-gab, b + gab + gbc, -gbc], [-gac, -gbc, c + gac + gbc]]

    def det(x):
        return (x[0][0] * (x[1][1] * x[2][2] - x[1][2] * x[2][1]) - x[0][1] * (x[1][0] * x[2][2] - x[1][2] * x[2][0])
                + x[0][2] * (x[1][0] * x[2][1] - x[1][1] * x[2][0]))
    rises = []
    for column in range(3):
        replaced = [[(p if row == 0 else 0.0) if k == column else m[row][k] for k in range(3)] for row in range(3)]
        rises.append(det(replaced) / det(m))
    assert Thermal(rc, 45.0).steady((p, 0.0, 0.0)) == pytest.approx([45.0 + r for r in rises], abs=1e-9)


def test_coupled_transient_matches_an_independent_rk4_integration() -> None:
    rc = PackageRC()
    g = np.diag([1 / r for r in rc.to_coolant])
    for (i, j), r in zip(((0, 1), (0, 2), (1, 2)), rc.coupling):
        g[i, j] = g[j, i] = -1 / r
        g[i, i] += 1 / r
        g[j, j] += 1 / r
    c = np.array(rc.capacitance)
    power = np.array([900.0, 60.0, 18.0])

    def slope(rise):
        return (power - g @ rise) / c
    rise, dt, steps = np.zeros(3), 1e-3, 0
    for checkpoint in (0.5, 2.0, 10.0, 60.0):
        while steps * dt < checkpoint - 1e-9:
            k1 = slope(rise)
            k2 = slope(rise + dt / 2 * k1)
            k3 = slope(rise + dt / 2 * k2)
            k4 = slope(rise + dt * k3)
            rise, steps = rise + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4), steps + 1
        assert Thermal(rc, 45.0).step(checkpoint, power) == pytest.approx(45.0 + rise, abs=1e-6)


def test_reference_package_tends_to_the_lumped_convection_limit() -> None:
    """HBFSim's reference package (sysmodel/hbf/reference_package.py) with silicon a million times more
    conductive is isothermal: every die's rise per watt anywhere is 1 / (h x area) of the top convection."""
    package = ReferencePackage(conductivity_w_mk=1.5e8)
    lumped = 1 / (package.top_htc_w_m2k * package.side_m ** 2)
    assert solve(package, cell_m=0.002) == pytest.approx(np.full((3, 3), lumped), rel=1e-3)


def test_reference_package_is_reciprocal_and_converges_with_the_mesh() -> None:
    """Reciprocity (a watt in die a heats die b as a watt in b heats a), every rise above the isothermal floor,
    and HBFSim's two meshes (2 mm, 1 mm) within 1 % of each other."""
    coarse, fine = solve(cell_m=0.002), solve(cell_m=0.001)
    assert coarse == pytest.approx(coarse.T, rel=1e-9)
    floor = 1 / (ReferencePackage().top_htc_w_m2k * ReferencePackage().side_m ** 2)
    assert (np.diag(fine) > floor).all()
    assert coarse == pytest.approx(fine, rel=0.01)


def test_reference_package_network_keeps_the_grids_steady_state() -> None:
    rc = package_rc(cell_m=0.002)
    thermal = Thermal(rc, 0.0)
    assert np.column_stack([thermal.steady(unit) for unit in np.eye(3)]) == pytest.approx(solve(cell_m=0.002),
                                                                                         rel=1e-9)


def test_limit_powers_alone_and_shared_on_a_symmetric_network() -> None:
    """Every resistance 1 K/W: G = 4I - J, so R = (I + J) / 4 (0.5 K/W on the diagonal, 0.25 off it). Alone, a die
    reaches its limit at (limit - ambient) / 0.5; a package power shared evenly heats each die by
    (0.5 + 0.25 + 0.25) / 3 = 1/3 K per W, so it reaches its limit at 3 x (limit - ambient)."""
    thermal = Thermal(PackageRC(to_coolant=(1.0, 1.0, 1.0), coupling=(1.0, 1.0, 1.0), limits_c=(90.0, 95.0, 85.0)),
                      0.0)
    assert list(limit_powers(thermal).values()) == pytest.approx([180.0, 190.0, 170.0], rel=1e-9)
    assert list(limit_powers(thermal, shares=(1 / 3, 1 / 3, 1 / 3)).values()) == pytest.approx(
        [270.0, 285.0, 255.0], rel=1e-9)
    # All of it into the GPU: the GPU's own figure is its alone one, the HBM sees 0.25 K/W of it.
    assert limit_powers(thermal, shares=(1.0, 0.0, 0.0))["hbm"] == pytest.approx(95.0 / 0.25, rel=1e-9)


def test_limit_powers_refuse_shares_that_do_not_split_one_power() -> None:
    thermal = Thermal(PackageRC(), 45.0)
    for shares in ((0.5, 0.5), (0.5, 0.5, 0.5), (1.5, -0.5, 0.0)):
        with pytest.raises(ConfigError, match="shares"):
            limit_powers(thermal, shares=shares)


def _one_cell_per_tile_reference(package: ReferencePackage) -> np.ndarray:
    """The reference package's two-layer network at one cell per 10 mm tile, written out node by node (32 nodes:
    layer, row, column): each cell joins its layer neighbours through k × thickness, the spreader cell above it
    through k × area over the half-thicknesses of both layers, and the ambient through half the spreader and the
    top convection in series. Region-average rise per watt, as `solve` returns it."""
    k, t, area, n = package.conductivity_w_mk, (package.source_m, package.spreader_m), package.tile_m ** 2, 4
    node = {(layer, row, col): (layer * n + row) * n + col for layer in (0, 1) for row in range(n) for col in range(n)}
    g = np.zeros((2 * n * n, 2 * n * n))

    def join(a, b, conductance):
        g[a, a] += conductance
        g[b, b] += conductance
        g[a, b] -= conductance
        g[b, a] -= conductance

    for (layer, row, col), a in node.items():
        if col + 1 < n:
            join(a, node[layer, row, col + 1], k * t[layer])
        if row + 1 < n:
            join(a, node[layer, row + 1, col], k * t[layer])
        if layer == 0:
            join(a, node[1, row, col], 1 / (t[0] / 2 / (k * area) + t[1] / 2 / (k * area)))
        else:
            g[a, a] += 1 / (t[1] / 2 / (k * area) + 1 / (package.top_htc_w_m2k * area))
    regions = {"gpu": [(1, 1), (2, 1), (1, 2), (2, 2)], "hbm": [(0, 1), (1, 0), (2, 0), (3, 1)],
               "hbf": [(0, 2), (1, 3), (2, 3), (3, 2)]}   # (row, col) of each die type's tiles
    heat = np.zeros((2 * n * n, 3))
    for column, name in enumerate(("gpu", "hbm", "hbf")):
        for row, col in regions[name]:
            heat[node[0, row, col], column] = 1 / len(regions[name])
    rise = np.linalg.solve(g, heat)
    return np.array([[np.mean([rise[node[0, row, col], b] for row, col in regions[name]]) for b in range(3)]
                     for name in ("gpu", "hbm", "hbf")])


@pytest.mark.parametrize("package", [ReferencePackage(), ReferencePackage(source_m=3e-4, spreader_m=1e-4,
                                                                          top_htc_w_m2k=5e4, conductivity_w_mk=20.0)])
def test_reference_package_at_one_cell_per_tile_is_its_network_written_out(package) -> None:
    assert solve(package, cell_m=0.01) == pytest.approx(_one_cell_per_tile_reference(package), rel=1e-9)


def test_reference_package_capacitance_is_each_die_types_silicon_and_the_limits_pass_through() -> None:
    # Four 10 mm tiles per die type (the GPU one 20 mm tile), 500 um of silicon at 2,330 kg/m^3 x 710 J/kgK.
    silicon = 4 * 0.01 ** 2 * 5e-4 * 2330.0 * 710.0
    rc = package_rc(cell_m=0.01, limits_c=(80.0, 81.0, 82.0))
    assert rc.capacitance == pytest.approx((silicon,) * 3, rel=1e-12) and rc.limits_c == (80.0, 81.0, 82.0)


def test_reference_package_defaults_to_hbfsims_fine_mesh() -> None:
    assert solve() == pytest.approx(solve(cell_m=0.001), rel=1e-12)
    assert package_rc() == package_rc(cell_m=0.001)


@pytest.mark.parametrize("field", ["side_m", "tile_m", "source_m", "spreader_m", "top_htc_w_m2k",
                                   "conductivity_w_mk", "volumetric_heat_j_m3k"])
def test_reference_package_refuses_a_dimension_or_material_figure_that_is_not_positive(field) -> None:
    with pytest.raises(ConfigError, match="^reference package: dimensions and material figures must be > 0$"):
        ReferencePackage(**{field: 0.0})


@pytest.mark.parametrize("cell_m", [0.003, 0.004])   # divides neither; divides the side (10 cells) but not a tile
def test_a_cell_that_does_not_divide_the_tiles_is_refused(cell_m) -> None:
    with pytest.raises(ConfigError, match=rf"^reference package: a {cell_m} m cell must divide the tiles$"):
        solve(cell_m=cell_m)
