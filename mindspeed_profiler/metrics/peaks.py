"""Pure: the dense BF16 / FP16 peak of one device, by its name, for MFU's denominator.

`peak_tflops(name)` matches `name` (what torch.cuda.get_device_name / torch.npu.get_device_name
return: "NVIDIA H100 80GB HBM3", "Ascend910B2", "AMD Instinct MI300X") against the table below, case
insensitive, first row whose key is a substring of the name; so the more specific rows come first
("H100 PCIe" before "H100", "H200" before "H20", "GB200" before "B200"). Dense means without 2:4
structured sparsity (the datasheets' larger figure is the sparse one, half of it is dense). A CPU has
no row: its peak is whatever `metrics.peak_tflops` says, otherwise no MFU.

The numbers are per device as torch sees it (one GPU, one NPU): MFU is per rank.
"""
from __future__ import annotations

# (name substring, dense BF16 TFLOPS, source). FP16 where the device has no BF16 (V100).
PEAKS: tuple[tuple[str, float, str], ...] = (
    # ---- Huawei Ascend. One AI Core's cube unit does 16x16x16 FP16 multiply-adds a cycle (4096 MACs,
    # 8192 FLOPs; Hot Chips 31, "DaVinci: A Scalable Architecture for Neural Network Computing").
    # Huawei publishes no per-variant datasheet figure; these are the figures quoted for each variant
    # (about 1.9 GHz x 8192 FLOPs x the AI Core count HAMi's device-configmap gives: 910B2 24, 910B3 and
    # 910B4 20). Set metrics.peak_tflops from your vendor's sheet when it differs.
    ("Ascend910B1", 414.0, "quoted FP16 figure for the 910B1 (no public Huawei datasheet)"),
    ("Ascend910B2", 376.0, "quoted FP16 figure for the 910B2: 24 AI Cores x 8192 FLOPs x ~1.91 GHz"),
    ("Ascend910B3", 313.0, "quoted FP16 figure for the 910B3: 20 AI Cores x 8192 FLOPs x ~1.91 GHz"),
    ("Ascend910B4", 280.0, "quoted FP16 figure for the 910B4: 20 AI Cores, lower clock"),
    ("910B", 354.0, "unnamed 910B variant: verl's verl/utils/flops_counter.py value (\"910B\": 354e12)"),
    ("Ascend910_93", 376.0, "Ascend 910C (A3) die as torch_npu names it (Ascend910_93xx): half of the 752 TFLOPS dense "
                            "BF16 per two-die package (Huawei, \"Serving LLMs on Huawei CloudMatrix384\", arXiv:2506.12708)"),
    ("910C", 752.0, "Ascend 910C package, two dies (Huawei, CloudMatrix384 paper, arXiv:2506.12708)"),
    ("Ascend910", 256.0, "original Ascend 910 (910A): 256 TFLOPS FP16 (Huawei launch, Hot Chips 31)"),
    # ---- NVIDIA (datasheets' BF16 Tensor Core figure with sparsity, halved)
    ("GB200", 2500.0, "NVIDIA GB200 NVL72 datasheet: 5 PFLOPS BF16 sparse per GPU"),
    ("B200", 2250.0, "NVIDIA HGX B200 datasheet: 4.5 PFLOPS BF16 sparse per GPU"),
    ("H100 PCIe", 756.0, "NVIDIA H100 datasheet, PCIe: 1513 TFLOPS BF16 sparse"),
    ("H100 NVL", 835.0, "NVIDIA H100 datasheet, NVL: 1671 TFLOPS BF16 sparse"),
    ("H100", 989.0, "NVIDIA H100 datasheet, SXM: 1979 TFLOPS BF16 sparse"),
    ("H800 PCIe", 756.0, "NVIDIA H800 PCIe: the H100 PCIe's compute (export variant, NVLink cut)"),
    ("H800", 989.0, "NVIDIA H800 SXM: the H100 SXM's compute (export variant, NVLink cut); verl 989e12"),
    ("H200 NVL", 835.0, "NVIDIA H200 datasheet, NVL: 1671 TFLOPS BF16 sparse"),
    ("H200", 989.0, "NVIDIA H200 datasheet, SXM: 1979 TFLOPS BF16 sparse"),
    ("H20", 148.0, "NVIDIA H20 product brief: 148 TFLOPS BF16 dense; verl 148e12"),
    ("A100", 312.0, "NVIDIA A100 datasheet: 312 TFLOPS BF16 dense (SXM and PCIe)"),
    ("A800", 312.0, "NVIDIA A800: the A100's compute (export variant); verl 312e12"),
    ("L40S", 362.05, "NVIDIA L40S datasheet: 362.05 TFLOPS BF16 dense (733 sparse)"),
    ("V100S", 130.0, "NVIDIA V100S PCIe datasheet: 130 TFLOPS FP16 Tensor (no BF16)"),
    ("V100-PCIE", 112.0, "NVIDIA V100 datasheet, PCIe: 112 TFLOPS FP16 Tensor (no BF16)"),
    ("V100", 125.0, "NVIDIA V100 datasheet, SXM2: 125 TFLOPS FP16 Tensor (no BF16)"),
    # ---- AMD
    ("MI300X", 1307.4, "AMD Instinct MI300X datasheet: 1307.4 TFLOPS BF16 dense (2614.9 sparse)"),
    ("MI250X", 383.0, "AMD Instinct MI250X datasheet: 383 TFLOPS FP16 / BF16"),
)


def peak_tflops(device_name: str | None) -> float | None:
    """The dense BF16 / FP16 peak of the device called `device_name`, in TFLOPS; None for a CPU, an
    unknown device or no name."""
    if not isinstance(device_name, str) or not device_name.strip():
        return None
    folded = device_name.lower()
    for key, tflops, _source in PEAKS:
        if key.lower() in folded:
            return tflops
    return None
