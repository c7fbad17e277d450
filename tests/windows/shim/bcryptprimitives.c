/* Test-only shim, never shipped: Rust's standard library imports ProcessPrng
 * from bcryptprimitives.dll, which Wine 8 lacks. This DLL, placed beside the
 * test exe, provides it with advapi32's RtlGenRandom (SystemFunction036). */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk)) return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
