"""/proc/cpuinfo of real machines (the flags of the first processor, shortened to the usual set), for the tests
of which class each loads."""

ZEN2 = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
        "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid "
        "extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt "
        "tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a "
        "misalignsse 3dnowprefetch osvw topoext ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep "
        "bmi2 rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 clzero xsaveerptr wbnoinvd arat "
        "umip rdpid")
SKYLAKE_SP = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss "
              "ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid pni pclmulqdq "
              "ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand "
              "hypervisor lahf_lm abm 3dnowprefetch invpcid_single pti fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 "
              "erms invpcid rtm mpx avx512f avx512dq rdseed adx smap clflushopt clwb avx512cd avx512bw avx512vl "
              "xsaveopt xsavec xgetbv1 xsaves arat pku ospke md_clear")
ICELAKE_SP = SKYLAKE_SP.replace(" pti", "") + (" avx512ifma sha_ni avx512vbmi umip avx512_vbmi2 gfni vaes vpclmulqdq "
                                               "avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid")
IVY_BRIDGE = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
              "syscall nx rdtscp lm constant_tsc rep_good nopl pni pclmulqdq ssse3 cx16 sse4_1 sse4_2 x2apic popcnt "
              "aes xsave avx f16c rdrand hypervisor lahf_lm fsgsbase smep erms xsaveopt")
# AWS c5 / m5 (2nd generation), a Cascade Lake cloud host.
CASCADE_LAKE = (SKYLAKE_SP.replace(" hle", "").replace(" rtm", "").replace(" md_clear", "")
                + " ida avx512_vnni md_clear flush_l1d arch_capabilities")
# AWS m7i, Xeon Platinum 8488C.
SAPPHIRE_RAPIDS = (ICELAKE_SP + " avx_vnni avx512_bf16 wbnoinvd waitpkg tme cldemote movdiri movdir64b serialize "
                   "amx_bf16 avx512_fp16 amx_tile amx_int8 arch_capabilities")
# EPYC 7003 (Milan) guest: Zen 2's flags and VAES, VPCLMULQDQ, and more; no AVX-512.
ZEN3 = ZEN2 + " pku ospke vaes vpclmulqdq fsrm invpcid erms"
# The 2-vCPU KVM guest of an AMD EPYC 9004 (Genoa) these tests were written on.
ZEN4 = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 "
        "ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc "
        "cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe "
        "popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm "
        "sse4a misalignsse 3dnowprefetch osvw topoext cpuid_fault vmmcall fsgsbase tsc_adjust bmi1 avx2 smep "
        "bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni "
        "avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx512_bf16 clzero xsaveerptr arat avx512vbmi umip "
        "avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid fsrm")
# A 2-vCPU KVM guest of an EPYC family 26 (Zen 5): Zen 4's flags and its own additions, and no rdseed, which its
# hypervisor hides (the guest of issue 45, where the avx2 build ran 1.9x slower than IFMA's).
ZEN5_GUEST = ZEN4.replace(" rdseed", "") + " avx_vnni movdiri movdir64b avx512_vp2intersect"
# Westmere (Xeon X5650): SSE4.2, no AVX.
WESTMERE = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 "
            "ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc arch_perfmon pebs bts rep_good nopl xtopology "
            "nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 cx16 xtpr pdcm "
            "pcid dca sse4_1 sse4_2 popcnt aes lahf_lm epb pti ssbd ibrs ibpb stibp dtherm ida arat flush_l1d")
NEOVERSE_N1 = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"


def cpuinfo(flags: str, name: str = "flags", family: tuple[str, int] = ("SomeVendor", 1)) -> bytes:
    block = (f"processor\t: 0\nvendor_id\t: {family[0]}\ncpu family\t: {family[1]}\n{name}\t\t: {flags}\n"
             "bogomips\t: 4000.00\n")
    return (block + "\n" + block.replace("processor\t: 0", "processor\t: 1").replace(flags, "fpu")).encode()
