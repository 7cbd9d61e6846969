import pytest

from reconciler.controlplane.inventory import (
    GIB,
    TIB,
    InventoryError,
    Machine,
    default_inventory,
    load_inventory,
)


def test_default_inventory_is_four_racks_of_four_eight_gpu_machines():
    inv = default_inventory()
    assert len(inv) == 16
    assert [m.name for m in inv][:3] == ["gpu-01", "gpu-02", "gpu-03"]
    assert {m.rack for m in inv} == {"rack-1", "rack-2", "rack-3", "rack-4"}
    assert all(m.gpus == 8 and m.cpu_cores == 128 and m.memory_bytes == 2 * TIB for m in inv)
    # one NVLink domain per two machines, one InfiniBand fabric per rack
    assert len({m.nvlink_domain for m in inv}) == 8
    assert len({m.fabric for m in inv}) == 4


def test_default_inventory_fits_the_seed_runs():
    inv = default_inventory()
    m = inv["gpu-01"]
    assert m.gpus * 12 <= m.cpu_cores and m.gpus * 120 * GIB <= m.memory_bytes  # llama-ft per GPU
    assert inv.total_gpus >= 100 and m.cpu_cores >= 8 * 8 and m.memory_bytes >= 8 * 32 * GIB  # sweep


def test_load_inventory_from_a_mapping_with_defaults():
    inv = load_inventory(
        {
            "defaults": {"gpus": 4, "gpu_model": "A100", "memory_bytes": "512Gi", "rack": "r1"},
            "machines": [{"name": "a"}, {"name": "b", "gpus": 8, "healthy_gpus": 7}],
        }
    )
    assert inv["a"] == Machine(name="a", gpus=4, gpu_model="A100", memory_bytes=512 * GIB, rack="r1")
    assert inv["b"].healthy == 7


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"machines": []}, "machines:"),
        ({"machines": [{"gpus": 8}]}, "machines[0].name"),
        ({"machines": [{"name": "a", "gpus": -1}]}, "machines[0].gpus"),
        ({"machines": [{"name": "a", "colour": "red"}]}, "unknown field 'colour'"),
        ({"machines": [{"name": "a"}, {"name": "a"}]}, "unique"),
    ],
)
def test_load_inventory_names_the_bad_field(data, message):
    with pytest.raises(InventoryError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_inventory(data)
