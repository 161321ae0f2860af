"""Operations tools: backup and restore (``backup``) and the installation doctor (``doctor``)."""
