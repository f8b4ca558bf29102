; Hailfire installer for Windows (NSIS 3). Built by `installer/package.sh --windows EXE`,
; which defines:
;   VERSION   the game's version (Cargo.toml)
;   STAGE     a folder holding hailfire.exe, content\, mods\, licenses\, README.md, hailfire.ico
;   OUTFILE   the installer to write
; Installs per machine into Program Files, with a Start-menu entry, an optional desktop
; shortcut, an optional firewall rule for the game's UDP port, and an uninstaller.

Unicode true
!include "MUI2.nsh"

!ifndef VERSION
  !error "define VERSION (installer/package.sh does)"
!endif
!ifndef STAGE
  !error "define STAGE (installer/package.sh does)"
!endif
!ifndef OUTFILE
  !define OUTFILE "hailfire-${VERSION}-windows-x86_64-setup.exe"
!endif

Name "Hailfire ${VERSION}"
OutFile "${OUTFILE}"
InstallDir "$PROGRAMFILES64\Hailfire"
InstallDirRegKey HKLM "Software\Hailfire" "InstallDir"
RequestExecutionLevel admin
SetCompressor /SOLID lzma

!define MUI_ICON "${STAGE}\hailfire.ico"
!define MUI_UNICON "${STAGE}\hailfire.ico"
!define MUI_FINISHPAGE_RUN "$INSTDIR\hailfire.exe"
!define MUI_FINISHPAGE_RUN_TEXT "Play Hailfire now"

!insertmacro MUI_PAGE_LICENSE "${STAGE}\licenses\LICENSE-MIT"
!insertmacro MUI_PAGE_COMPONENTS
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!insertmacro MUI_PAGE_FINISH
!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES
!insertmacro MUI_LANGUAGE "English"

!define UNINSTALL_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\Hailfire"

Section "Hailfire (required)" SecGame
  SectionIn RO
  SetOutPath "$INSTDIR"
  File "${STAGE}\hailfire.exe"
  File "${STAGE}\hailfire.ico"
  File "${STAGE}\README.md"
  File /r "${STAGE}\licenses"
  ; The content lives beside the executable: the game finds it there.
  File /r "${STAGE}\content"
  File /r "${STAGE}\mods"
  WriteRegStr HKLM "Software\Hailfire" "InstallDir" "$INSTDIR"
  WriteUninstaller "$INSTDIR\uninstall.exe"
  WriteRegStr HKLM "${UNINSTALL_KEY}" "DisplayName" "Hailfire"
  WriteRegStr HKLM "${UNINSTALL_KEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKLM "${UNINSTALL_KEY}" "Publisher" "The Hailfire developers"
  WriteRegStr HKLM "${UNINSTALL_KEY}" "DisplayIcon" "$INSTDIR\hailfire.ico"
  WriteRegStr HKLM "${UNINSTALL_KEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegDWORD HKLM "${UNINSTALL_KEY}" "NoModify" 1
  WriteRegDWORD HKLM "${UNINSTALL_KEY}" "NoRepair" 1
  CreateDirectory "$SMPROGRAMS\Hailfire"
  CreateShortcut "$SMPROGRAMS\Hailfire\Hailfire.lnk" "$INSTDIR\hailfire.exe" "" "$INSTDIR\hailfire.ico"
  CreateShortcut "$SMPROGRAMS\Hailfire\Uninstall Hailfire.lnk" "$INSTDIR\uninstall.exe"
SectionEnd

Section "Desktop shortcut" SecDesktop
  CreateShortcut "$DESKTOP\Hailfire.lnk" "$INSTDIR\hailfire.exe" "" "$INSTDIR\hailfire.ico"
SectionEnd

Section "Allow hosting through Windows Firewall (UDP 24680)" SecFirewall
  ; Friends can join a game you host. Removed again by the uninstaller.
  nsExec::ExecToLog 'netsh advfirewall firewall add rule name="Hailfire" dir=in action=allow protocol=UDP localport=24680 program="$INSTDIR\hailfire.exe"'
SectionEnd

Section "Uninstall"
  nsExec::ExecToLog 'netsh advfirewall firewall delete rule name="Hailfire"'
  Delete "$DESKTOP\Hailfire.lnk"
  RMDir /r "$SMPROGRAMS\Hailfire"
  Delete "$INSTDIR\hailfire.exe"
  Delete "$INSTDIR\hailfire.ico"
  Delete "$INSTDIR\README.md"
  Delete "$INSTDIR\uninstall.exe"
  RMDir /r "$INSTDIR\licenses"
  RMDir /r "$INSTDIR\content"
  RMDir /r "$INSTDIR\mods"
  RMDir "$INSTDIR"
  DeleteRegKey HKLM "${UNINSTALL_KEY}"
  DeleteRegKey HKLM "Software\Hailfire"
  ; Your settings, mods, saves and logs in %APPDATA%\Hailfire are left alone.
SectionEnd

LangString DESC_Game ${LANG_ENGLISH} "The game, its content and the example mods."
LangString DESC_Desktop ${LANG_ENGLISH} "A shortcut on the desktop."
LangString DESC_Firewall ${LANG_ENGLISH} "Let friends reach a game you host (UDP port 24680)."
!insertmacro MUI_FUNCTION_DESCRIPTION_BEGIN
  !insertmacro MUI_DESCRIPTION_TEXT ${SecGame} $(DESC_Game)
  !insertmacro MUI_DESCRIPTION_TEXT ${SecDesktop} $(DESC_Desktop)
  !insertmacro MUI_DESCRIPTION_TEXT ${SecFirewall} $(DESC_Firewall)
!insertmacro MUI_FUNCTION_DESCRIPTION_END
