/* A test-only Windows program for tests/windows/suite.py, built with mingw
 * by run.sh (never shipped). Copied as claude.exe and bash.exe it stands in
 * for Claude Code and its shell above a `pcmail.exe lease claim`.
 *
 *   helper.exe sleep               prints "pid N", then waits forever
 *   helper.exe run PROGRAM ARGS…   prints "helper: pid N started", runs PROGRAM,
 *                                  prints "helper: pid N exit C" when it ended,
 *                                  then waits forever
 *   helper.exe tree PIDFILE stay|exit
 *                                  starts `helper.exe sleep` (a child that
 *                                  outlives it), writes "SELF CHILD" to PIDFILE,
 *                                  then waits forever (stay) or exits 0 (exit)
 */
#include <windows.h>
#include <stdio.h>
#include <wchar.h>

static void quote_into(wchar_t *line, size_t cap, const wchar_t *arg) {
    int plain = arg[0] && !wcspbrk(arg, L" \t\"");
    if (plain) { wcsncat(line, arg, cap - wcslen(line) - 1); return; }
    wcsncat(line, L"\"", cap - wcslen(line) - 1);
    wcsncat(line, arg, cap - wcslen(line) - 1); /* the suite passes no embedded quotes */
    wcsncat(line, L"\"", cap - wcslen(line) - 1);
}

static DWORD start(wchar_t *line, PROCESS_INFORMATION *pi) {
    STARTUPINFOW si;
    ZeroMemory(&si, sizeof si);
    si.cb = sizeof si;
    if (!CreateProcessW(NULL, line, NULL, NULL, TRUE, 0, NULL, NULL, &si, pi)) return GetLastError();
    return 0;
}

int wmain(int argc, wchar_t **argv) {
    static wchar_t line[32768];
    PROCESS_INFORMATION pi;
    if (argc >= 2 && !wcscmp(argv[1], L"sleep")) {
        printf("pid %lu\n", GetCurrentProcessId());
        fflush(stdout);
        Sleep(INFINITE);
    }
    if (argc >= 3 && !wcscmp(argv[1], L"run")) {
        printf("helper: pid %lu started\n", GetCurrentProcessId());
        fflush(stdout);
        line[0] = 0;
        for (int i = 2; i < argc; i++) {
            if (i > 2) wcscat(line, L" ");
            quote_into(line, 32768, argv[i]);
        }
        DWORD err = start(line, &pi);
        DWORD code = err;
        if (!err) {
            WaitForSingleObject(pi.hProcess, INFINITE);
            GetExitCodeProcess(pi.hProcess, &code);
        }
        printf("helper: pid %lu exit %lu\n", GetCurrentProcessId(), code);
        fflush(stdout);
        Sleep(INFINITE);
    }
    if (argc >= 4 && !wcscmp(argv[1], L"tree")) {
        wchar_t self[MAX_PATH];
        GetModuleFileNameW(NULL, self, MAX_PATH);
        line[0] = 0;
        quote_into(line, 32768, self);
        wcscat(line, L" sleep");
        if (start(line, &pi)) return 3;
        FILE *f = _wfopen(argv[2], L"w");
        if (!f) return 4;
        fprintf(f, "%lu %lu\n", GetCurrentProcessId(), pi.dwProcessId);
        fclose(f);
        if (!wcscmp(argv[3], L"exit")) return 0;
        Sleep(INFINITE);
    }
    fprintf(stderr, "usage: helper.exe sleep | run PROGRAM ARGS... | tree PIDFILE stay|exit\n");
    return 2;
}
